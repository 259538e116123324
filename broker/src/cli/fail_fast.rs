//! librdkafka reports a refused login or a failed TLS handshake only through its error
//! callback, and then retries the connection until each record's `message.timeout.ms` ends:
//! `strom produce` with a wrong password would wait and then say "Message timed out". This
//! client context keeps the first such error, so the command stops at once and names it with
//! the exit code the admin commands give for the same cause (docs/cli.md, "Exit codes").

use std::sync::{Arc, Mutex};

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;
use tokio::sync::watch;

use super::error::CliError;

/// Cloned: one copy goes to librdkafka as the client's context, the command keeps another
/// (librdkafka's wrappers do not hand the context back).
#[derive(Clone)]
pub struct FailFast(Arc<Inner>);

struct Inner {
    brokers: String,
    first: Mutex<Option<CliError>>,
    seen: watch::Sender<bool>,
}

impl FailFast {
    pub fn new(brokers: &str) -> FailFast {
        FailFast(Arc::new(Inner {
            brokers: brokers.to_string(),
            first: Mutex::new(None),
            seen: watch::channel(false).0,
        }))
    }

    /// Changes to `true` once an error that no retry can mend was reported.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.0.seen.subscribe()
    }

    /// The error kept, once (the command returns it).
    pub fn take(&self) -> Option<CliError> {
        self.0.first.lock().ok()?.take()
    }
}

/// What a librdkafka global error means for the command, if it is one that retrying cannot
/// mend: a refused login (SASL_AUTHENTICATION_FAILED, as the admin commands say) or a TLS
/// handshake that failed (the broker cannot be talked to).
fn fatal(error: &KafkaError, reason: &str, brokers: &str) -> Option<CliError> {
    match error.rdkafka_error_code()? {
        RDKafkaErrorCode::Authentication => Some(CliError::kafka(
            format!("logging in to {brokers}"),
            RDKafkaErrorCode::SaslAuthenticationFailed as i16,
            Some(reason.to_string()),
        )),
        RDKafkaErrorCode::SSL => Some(CliError::Unreachable {
            addr: brokers.to_string(),
            reason: format!("TLS handshake failed: {reason}"),
        }),
        _ => None,
    }
}

impl ClientContext for FailFast {
    fn error(&self, error: KafkaError, reason: &str) {
        match fatal(&error, reason, &self.0.brokers) {
            Some(e) => {
                if let Ok(mut first) = self.0.first.lock() {
                    first.get_or_insert(e);
                }
                self.0.seen.send_replace(true);
            }
            None => tracing::debug!("librdkafka: {error}: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::error::{EXIT_KAFKA, EXIT_UNREACHABLE};

    #[test]
    fn given_librdkafka_errors_when_classified_then_login_and_tls_failures_stop_the_command() {
        let global = |c| KafkaError::Global(c);
        let login = fatal(
            &global(RDKafkaErrorCode::Authentication),
            "bad password",
            "b:1",
        );
        let login = login.expect("a refused login stops the command");
        assert_eq!(login.exit_code(), EXIT_KAFKA);
        assert!(
            login.to_string().contains("SASL_AUTHENTICATION_FAILED"),
            "{login}"
        );
        let tls = fatal(&global(RDKafkaErrorCode::SSL), "unknown ca", "b:1").unwrap();
        assert_eq!(tls.exit_code(), EXIT_UNREACHABLE);
        // A broker that is down or a transport hiccup is retried by librdkafka.
        for c in [
            RDKafkaErrorCode::BrokerTransportFailure,
            RDKafkaErrorCode::AllBrokersDown,
        ] {
            assert!(fatal(&global(c), "", "b:1").is_none(), "{c:?}");
        }
    }
}
