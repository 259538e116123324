//! Which object store a broker uses: the local filesystem backend or an S3-compatible server,
//! both through the `object_store` crate. Credentials are object_store's business
//! (`AmazonS3Builder::from_env`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, ...); nothing here logs or returns them.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;

/// The configured backend (`remote.storage.local.path` or `remote.storage.s3.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    Local {
        path: std::path::PathBuf,
    },
    S3 {
        /// Empty = AWS's endpoint for the region.
        endpoint: String,
        bucket: String,
        region: String,
    },
}

/// Requests fail after this long. Bounded so that a fetch of remote data when the store is
/// down gets its error in seconds, not after object_store's default three minutes of retries.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl StoreConfig {
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
        match self {
            StoreConfig::Local { path } => {
                std::fs::create_dir_all(path).map_err(|e| object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                })?;
                Ok(Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(path)?,
                ))
            }
            StoreConfig::S3 {
                endpoint,
                bucket,
                region,
            } => {
                let retry = object_store::RetryConfig {
                    max_retries: 2,
                    retry_timeout: Duration::from_secs(5),
                    ..Default::default()
                };
                let client = object_store::ClientOptions::new()
                    .with_timeout(REQUEST_TIMEOUT)
                    .with_connect_timeout(CONNECT_TIMEOUT)
                    .with_allow_http(endpoint.starts_with("http://"));
                let mut b = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_retry(retry)
                    .with_client_options(client);
                if !endpoint.is_empty() {
                    // Path-style requests: S3-compatible servers on an IP address have no
                    // per-bucket host names.
                    b = b
                        .with_endpoint(endpoint)
                        .with_virtual_hosted_style_request(false);
                }
                Ok(Arc::new(b.build()?))
            }
        }
    }
}
