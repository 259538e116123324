//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` takes it: `[authzid] NUL authcid NUL
//! password`, the authzid empty or the user. The password is checked against the user's
//! SCRAM credential (`scram::password_matches`): Strom stores no password.
//!
//! Kafka's messages: a token that does not split into three parts fails with the generic
//! "invalid credentials" message (`SaslException`); the cases below carry their own message
//! to the client (`SaslAuthenticationException`), and a wrong password and an unknown user
//! share one, so the answer never says whether the user exists.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlainError {
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    Tokens(usize),
    #[error("Authentication failed: username not specified")]
    NoUser,
    #[error("Authentication failed: password not specified")]
    NoPassword,
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    Authzid,
    #[error("Authentication failed: Invalid username or password")]
    Invalid,
}

impl PlainError {
    /// Whether Kafka sends this error's own message to the client (else the generic one).
    pub fn client_message(&self) -> bool {
        !matches!(self, PlainError::Tokens(_))
    }
}

/// The (user, password) of a PLAIN token.
pub fn parse(token: &[u8]) -> Result<(String, String), PlainError> {
    let s = String::from_utf8_lossy(token);
    let parts: Vec<&str> = s.split('\0').collect();
    if parts.len() != 3 {
        return Err(PlainError::Tokens(parts.len()));
    }
    let (authzid, user, password) = (parts[0], parts[1], parts[2]);
    if user.is_empty() {
        return Err(PlainError::NoUser);
    }
    if password.is_empty() {
        return Err(PlainError::NoPassword);
    }
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::Authzid);
    }
    Ok((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn given_plain_tokens_when_parsing_then_kafkas_answers() {
        assert_eq!(
            parse(b"\0alice\0pw").unwrap(),
            ("alice".into(), "pw".into())
        );
        assert_eq!(
            parse(b"alice\0alice\0pw").unwrap(),
            ("alice".into(), "pw".into())
        );
        assert_eq!(parse(b"bob\0alice\0pw"), Err(PlainError::Authzid));
        assert_eq!(parse(b"\0\0pw"), Err(PlainError::NoUser));
        assert_eq!(parse(b"\0alice\0"), Err(PlainError::NoPassword));
        assert_eq!(parse(b"alice"), Err(PlainError::Tokens(1)));
        assert!(!PlainError::Tokens(1).client_message());
    }

    proptest! {
        #[test]
        fn given_any_bytes_when_parsing_plain_then_no_panic(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = parse(&b);
        }
    }
}
