//! Moving one segment's files to and from the object store. Runs on the remote runtime (a
//! thread of its own), never on a shard: reads of the closed segment's files are plain
//! blocking reads on tokio's blocking pool.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use super::keys::{object_key, FileKind};

/// Files above this go up as a multipart upload (bounded memory; the object appears whole
/// only when the upload completes, as a PUT does).
const MULTIPART_ABOVE: u64 = 8 << 20;
const PART_SIZE: usize = 8 << 20;

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("background task failed: {0}")]
    Task(String),
}

impl TransferError {
    /// The segment's local files are gone (total retention or DeleteRecords won the race):
    /// the copy is abandoned, not retried.
    pub fn is_local_file_gone(&self) -> bool {
        matches!(self, TransferError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// What one object of a segment is made from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file of the closed segment. Retention may rename it `.deleted` meanwhile; the
    /// renamed file is tried too (same inode, same bytes).
    File(PathBuf),
    /// Bytes built by the shard (producer snapshot, leader epochs).
    Bytes(Bytes),
}

/// One segment to copy.
#[derive(Debug, Clone)]
pub struct SegmentUpload {
    pub prefix: String,
    pub segment_id: String,
    pub base_offset: i64,
    pub files: Vec<(FileKind, Source)>,
}

fn open_segment_file(path: &Path) -> Result<std::fs::File, TransferError> {
    std::fs::File::open(path).or_else(|e| {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(TransferError::Io {
                path: path.into(),
                source: e,
            });
        }
        let mut deleted = path.as_os_str().to_owned();
        deleted.push(".deleted");
        std::fs::File::open(&deleted).map_err(|source| TransferError::Io {
            path: path.into(),
            source,
        })
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TransferError> + Send + 'static,
) -> Result<T, TransferError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TransferError::Task(e.to_string()))?
}

async fn put_file(
    store: &Arc<dyn ObjectStore>,
    key: &ObjectPath,
    path: PathBuf,
) -> Result<u64, TransferError> {
    let (file, len) = blocking(move || {
        let f = open_segment_file(&path)?;
        let len = f
            .metadata()
            .map_err(|source| TransferError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        Ok((Arc::new((f, path)), len))
    })
    .await?;
    let read_at = |range: Range<u64>| {
        let file = file.clone();
        blocking(move || {
            use std::os::unix::fs::FileExt;
            let mut buf = vec![0u8; (range.end - range.start) as usize];
            file.0
                .read_exact_at(&mut buf, range.start)
                .map_err(|source| TransferError::Io {
                    path: file.1.clone(),
                    source,
                })?;
            Ok(Bytes::from(buf))
        })
    };
    if len <= MULTIPART_ABOVE {
        let b = read_at(0..len).await?;
        store.put(key, PutPayload::from(b)).await?;
        return Ok(len);
    }
    let upload = store.put_multipart(key).await?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    let mut at = 0;
    while at < len {
        let end = (at + PART_SIZE as u64).min(len);
        let chunk = match read_at(at..end).await {
            Ok(c) => c,
            Err(e) => {
                let _ = w.abort().await;
                return Err(e);
            }
        };
        // At most two parts in flight: memory stays near 2 x PART_SIZE per upload.
        w.wait_for_capacity(2).await?;
        w.put(chunk);
        at = end;
    }
    w.finish().await?;
    Ok(len)
}

/// PUTs every object of the segment; returns the bytes uploaded. On error some objects may
/// exist: the caller's `CopySegmentStarted` entry names them for cleanup.
pub async fn upload_segment(
    store: &Arc<dyn ObjectStore>,
    up: &SegmentUpload,
) -> Result<u64, TransferError> {
    let mut total = 0;
    for (kind, src) in &up.files {
        let key = ObjectPath::from(object_key(
            &up.prefix,
            up.base_offset,
            &up.segment_id,
            *kind,
        ));
        total += match src {
            Source::File(path) => put_file(store, &key, path.clone()).await?,
            Source::Bytes(b) => {
                store.put(&key, PutPayload::from(b.clone())).await?;
                b.len() as u64
            }
        };
    }
    Ok(total)
}

/// Deletes every object a segment may have (absent ones are fine: an interrupted copy may
/// not have reached them).
pub async fn delete_segment(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    base_offset: i64,
    segment_id: &str,
) -> Result<(), TransferError> {
    for kind in FileKind::ALL {
        let key = ObjectPath::from(object_key(prefix, base_offset, segment_id, kind));
        match store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A byte range of one object of a segment.
pub async fn read_range(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    base_offset: i64,
    segment_id: &str,
    kind: FileKind,
    range: Range<u64>,
) -> Result<Bytes, TransferError> {
    let key = ObjectPath::from(object_key(prefix, base_offset, segment_id, kind));
    Ok(store.get_range(&key, range).await?)
}

/// A whole object of a segment (indexes).
pub async fn read_object(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    base_offset: i64,
    segment_id: &str,
    kind: FileKind,
) -> Result<Bytes, TransferError> {
    let key = ObjectPath::from(object_key(prefix, base_offset, segment_id, kind));
    Ok(store.get(&key).await?.bytes().await?)
}

/// Mirrors the manifest next to the segments (for rebuilding a lost disk).
pub async fn put_manifest(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    json: Vec<u8>,
) -> Result<(), TransferError> {
    let key = ObjectPath::from(super::keys::manifest_key(prefix));
    store.put(&key, PutPayload::from(json)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::store::StoreConfig;

    #[tokio::test]
    async fn given_local_backend_when_uploading_then_objects_whole_and_deletable() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let store = StoreConfig::Local {
            path: root.path().join("bucket"),
        }
        .build()
        .unwrap();
        let log = data.path().join("00000000000000000000.log");
        // Above the multipart threshold, not a multiple of the part size.
        let body: Vec<u8> = (0..(MULTIPART_ABOVE as usize + 12345))
            .map(|i| i as u8)
            .collect();
        std::fs::write(&log, &body).unwrap();
        let up = SegmentUpload {
            prefix: "tenant-a/t-x/0".into(),
            segment_id: "id1".into(),
            base_offset: 0,
            files: vec![
                (FileKind::Log, Source::File(log.clone())),
                (
                    FileKind::LeaderEpochs,
                    Source::Bytes(Bytes::from_static(b"0\n1\n0 0\n")),
                ),
            ],
        };
        let n = upload_segment(&store, &up).await.unwrap();
        assert_eq!(n, body.len() as u64 + 8);
        let got = read_object(&store, &up.prefix, 0, "id1", FileKind::Log)
            .await
            .unwrap();
        assert_eq!(&got[..], &body[..]);
        let part = read_range(&store, &up.prefix, 0, "id1", FileKind::Log, 10..20)
            .await
            .unwrap();
        assert_eq!(&part[..], &body[10..20]);
        delete_segment(&store, &up.prefix, 0, "id1").await.unwrap();
        assert!(read_object(&store, &up.prefix, 0, "id1", FileKind::Log)
            .await
            .is_err());
        // Deleting again (orphan cleanup after a crash mid-delete) is fine.
        delete_segment(&store, &up.prefix, 0, "id1").await.unwrap();
    }

    #[tokio::test]
    async fn given_segment_renamed_deleted_when_uploading_then_renamed_file_read() {
        let root = tempfile::tempdir().unwrap();
        let store = StoreConfig::Local {
            path: root.path().join("b"),
        }
        .build()
        .unwrap();
        let log = root.path().join("00000000000000000005.log");
        std::fs::write(format!("{}.deleted", log.display()), b"abc").unwrap();
        let up = SegmentUpload {
            prefix: "tenant-a/t/0".into(),
            segment_id: "id".into(),
            base_offset: 5,
            files: vec![(FileKind::Log, Source::File(log))],
        };
        assert_eq!(upload_segment(&store, &up).await.unwrap(), 3);
        std::fs::remove_file(format!(
            "{}.deleted",
            root.path().join("00000000000000000005.log").display()
        ))
        .unwrap();
        let e = upload_segment(&store, &up).await.unwrap_err();
        assert!(e.is_local_file_gone(), "{e}");
    }
}
