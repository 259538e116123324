//! SASL tokens, as an unauthenticated client sends them: a PLAIN token, and a SCRAM exchange
//! whose client-first and client-final come from the input (split at the first NUL byte), for
//! both mechanisms, with and without a stored credential for the user. Any input must end in
//! an answer or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strom::metadata::scram::ScramMechanism;
use strom::security::{plain, scram};

fuzz_target!(|data: &[u8]| {
    let _ = plain::parse(data);
    let (first, last) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let _ = scram::parse_client_first(first);
    let _ = scram::parse_client_final(last);
    for m in ScramMechanism::ALL {
        // From a fixed salted password: the server side does no PBKDF2, so neither does this.
        let credential =
            scram::credential_from_salted(m, &[1; 64], b"salt".to_vec(), ScramMechanism::MIN_ITERATIONS);
        for known in [false, true] {
            let mut server = scram::ScramServer::new(m, [7; 32]);
            let c = credential.clone();
            if server.step(first, |_| known.then_some(c)).is_ok() {
                let _ = server.step(last, |_| None);
            }
        }
    }
});
