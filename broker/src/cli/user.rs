//! `strom user list|create|update|delete` against a running broker
//! (Describe/AlterUserScramCredentials, as rpk's `security user` and `kafka-configs.sh
//! --entity-type users`), and `strom user add`, which writes a credential into a stopped
//! broker's data dir (Kafka's `kafka-storage format --add-scram`).
//!
//! The password never goes over the wire: as Kafka's AdminClient does, the client picks a
//! random salt and sends the PBKDF2 salted password (RFC 5802's `Hi`) with the iteration
//! count; the broker derives and keeps only the stored and server keys.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use ring::rand::SecureRandom;
use serde::Serialize;

use super::client::{Client, ANY};
use super::error::{CliError, ItemError};
use super::output::{Format, Render, Table};
use crate::metadata::scram::ScramMechanism;
use crate::security::scram::salted_password;

/// Kafka's RESOURCE_NOT_FOUND: the user has no (such) credential.
const RESOURCE_NOT_FOUND: i16 = 91;

#[derive(Subcommand)]
pub enum UserCmd {
    /// Users with SCRAM credentials: their mechanisms and iteration counts.
    List {
        /// Only these users.
        users: Vec<String>,
    },
    /// Create a user (refused if it already has a credential for the mechanism).
    Create(Upsert),
    /// Change the password of a user that has a credential for the mechanism.
    Update(Upsert),
    /// Delete a user's credentials (every mechanism, or the --mechanism given).
    Delete {
        #[arg(required = true)]
        users: Vec<String>,
        #[arg(long)]
        mechanism: Option<String>,
    },
    /// Write a credential into a stopped broker's data dir (no broker is contacted).
    Add(AddArgs),
}

#[derive(Args)]
pub struct Upsert {
    /// User name (the principal is User:NAME). Not `user`: that is the caller's `--user`.
    #[arg(value_name = "USER")]
    pub name: String,
    /// The new password (prefer STROM_NEW_PASSWORD: a flag shows in `ps`); only its salted
    /// form is sent.
    #[arg(long, env = "STROM_NEW_PASSWORD", hide_env_values = true)]
    pub new_password: String,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "SCRAM-SHA-512")]
    pub mechanism: String,
    /// PBKDF2 iterations, 4096..=16384.
    #[arg(long, default_value_t = 4096)]
    pub iterations: i32,
}

#[derive(Args)]
pub struct AddArgs {
    /// User name (the principal will be User:NAME).
    pub name: String,
    // The password is the global `--password` (`SecurityArgs`), passed to `add`.
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "SCRAM-SHA-512")]
    pub mechanism: String,
    /// PBKDF2 iterations, 4096..=16384.
    #[arg(long, default_value_t = 4096)]
    pub iterations: i32,
    /// The broker's data directory.
    #[arg(long)]
    pub data_dir: PathBuf,
}

fn mechanism(name: &str) -> Result<ScramMechanism, CliError> {
    ScramMechanism::from_name(&name.to_ascii_uppercase()).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown mechanism {name:?}: SCRAM-SHA-256 or SCRAM-SHA-512"
        ))
    })
}

fn iterations(i: i32) -> Result<i32, CliError> {
    if (ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(&i) {
        Ok(i)
    } else {
        Err(CliError::Usage("--iterations must be 4096..=16384".into()))
    }
}

#[derive(Debug, Serialize)]
pub struct Credential {
    pub mechanism: String,
    pub iterations: i32,
}

#[derive(Debug, Serialize)]
pub struct UserEntry {
    pub user: String,
    pub credentials: Vec<Credential>,
    pub error: Option<ItemError>,
}

#[derive(Serialize)]
#[serde(transparent)]
pub struct Users(pub Vec<UserEntry>);

impl Render for Users {
    fn table(&self, t: &mut Table) {
        t.header(&["USER", "MECHANISM", "ITERATIONS"]);
        for u in &self.0 {
            match &u.error {
                Some(e) => t.row([u.user.clone(), e.name.clone(), "-".into()]),
                None => {
                    for c in &u.credentials {
                        t.row([
                            u.user.clone(),
                            c.mechanism.clone(),
                            c.iterations.to_string(),
                        ]);
                    }
                }
            }
        }
    }
}

/// What `create`, `update` and `delete` did, per user and mechanism.
#[derive(Debug, Serialize)]
pub struct Change {
    pub user: String,
    pub mechanism: String,
    pub error: Option<ItemError>,
}

#[derive(Serialize)]
#[serde(transparent)]
pub struct Changes(pub Vec<Change>);

impl Render for Changes {
    fn table(&self, t: &mut Table) {
        t.header(&["USER", "MECHANISM", "STATUS"]);
        for c in &self.0 {
            let status = match &c.error {
                None => "OK".to_string(),
                Some(e) => match &e.message {
                    Some(m) => format!("{}: {m}", e.name),
                    None => e.name.clone(),
                },
            };
            t.row([c.user.clone(), c.mechanism.clone(), status]);
        }
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub async fn run(client: &mut Client, cmd: UserCmd, format: Format) -> Result<(), CliError> {
    let changes = match cmd {
        UserCmd::List { users } => {
            let listed = list(client, &users).await?;
            let failed = listed.iter().filter(|u| u.error.is_some()).count();
            let total = listed.len();
            super::output::print(&Users(listed), format)?;
            if failed > 0 {
                return Err(CliError::Partial { failed, total });
            }
            return Ok(());
        }
        UserCmd::Create(u) => upsert(client, &u, false).await?,
        UserCmd::Update(u) => upsert(client, &u, true).await?,
        UserCmd::Delete { users, mechanism } => {
            delete(client, &users, mechanism.as_deref()).await?
        }
        UserCmd::Add(_) => unreachable!("`user add` runs without a broker (user::add)"),
    };
    let failed = changes.iter().filter(|c| c.error.is_some()).count();
    let total = changes.len();
    super::output::print(&Changes(changes), format)?;
    if failed > 0 {
        return Err(CliError::Partial { failed, total });
    }
    Ok(())
}

/// DescribeUserScramCredentials: every user (none named) or those named, each with its
/// credentials or its error (RESOURCE_NOT_FOUND for a user without any).
pub async fn list(client: &mut Client, users: &[String]) -> Result<Vec<UserEntry>, CliError> {
    let req = DescribeUserScramCredentialsRequest::default().with_users(if users.is_empty() {
        None
    } else {
        Some(
            users
                .iter()
                .map(|u| UserName::default().with_name(s(u)))
                .collect(),
        )
    });
    let (resp, _) = client.call(ANY, &req, 0).await?;
    if resp.error_code != 0 {
        return Err(CliError::kafka(
            "DescribeUserScramCredentials",
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
        ));
    }
    let mut out: Vec<UserEntry> = resp
        .results
        .iter()
        .map(|r| UserEntry {
            user: r.user.to_string(),
            credentials: r
                .credential_infos
                .iter()
                .map(|c| Credential {
                    mechanism: ScramMechanism::from_type(c.mechanism)
                        .map_or_else(|| format!("UNKNOWN({})", c.mechanism), |m| m.name().into()),
                    iterations: c.iterations,
                })
                .collect(),
            error: ItemError::from_code(
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            ),
        })
        .collect();
    out.sort_by(|a, b| a.user.cmp(&b.user));
    Ok(out)
}

/// The mechanisms `user` has a credential for (none for an unknown user).
async fn mechanisms_of(client: &mut Client, user: &str) -> Result<Vec<String>, CliError> {
    let listed = list(client, &[user.to_string()]).await?;
    let Some(u) = listed.into_iter().find(|u| u.user == user) else {
        return Ok(vec![]);
    };
    match u.error {
        None => Ok(u.credentials.into_iter().map(|c| c.mechanism).collect()),
        Some(e) if e.code == RESOURCE_NOT_FOUND => Ok(vec![]),
        Some(e) => Err(CliError::kafka(format!("user {user:?}"), e.code, e.message)),
    }
}

async fn upsert(client: &mut Client, u: &Upsert, update: bool) -> Result<Vec<Change>, CliError> {
    let m = mechanism(&u.mechanism)?;
    let iterations = iterations(u.iterations)?;
    if u.name.is_empty() || u.new_password.is_empty() {
        return Err(CliError::Usage(
            "the user and the password must not be empty".into(),
        ));
    }
    // Kafka's AlterUserScramCredentials only upserts; create and update say what they mean.
    let has = mechanisms_of(client, &u.name)
        .await?
        .contains(&m.name().to_string());
    match (has, update) {
        (true, false) => {
            return Err(CliError::Client(format!(
                "user {:?} already has a {} credential: `strom user update` changes its password",
                u.name,
                m.name()
            )))
        }
        (false, true) => {
            return Err(CliError::kafka(
                format!("user {:?}", u.name),
                RESOURCE_NOT_FOUND,
                Some(format!(
                    "no {} credential: `strom user create` makes one",
                    m.name()
                )),
            ))
        }
        _ => {}
    }
    let mut salt = vec![0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| CliError::Client("no system randomness for the salt".into()))?;
    let salted = salted_password(m, u.new_password.as_bytes(), &salt, iterations);
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(s(&u.name))
            .with_mechanism(m.type_id())
            .with_iterations(iterations)
            .with_salt(salt.into())
            .with_salted_password(salted.into()),
    ]);
    alter(client, req).await
}

async fn delete(
    client: &mut Client,
    users: &[String],
    only: Option<&str>,
) -> Result<Vec<Change>, CliError> {
    let only = only.map(mechanism).transpose()?;
    let mut deletions = Vec::new();
    for user in users {
        let mechs: Vec<ScramMechanism> = match only {
            Some(m) => vec![m],
            None => {
                let has = mechanisms_of(client, user).await?;
                let known: Vec<ScramMechanism> = has
                    .iter()
                    .filter_map(|n| ScramMechanism::from_name(n))
                    .collect();
                // An unknown user: ask for SCRAM-SHA-512 so the broker names the error.
                if known.is_empty() {
                    vec![ScramMechanism::Sha512]
                } else {
                    known
                }
            }
        };
        for m in mechs {
            deletions.push(
                ScramCredentialDeletion::default()
                    .with_name(s(user))
                    .with_mechanism(m.type_id()),
            );
        }
    }
    // One request per deletion: Kafka answers once per user, not per mechanism.
    let mut out = Vec::new();
    for d in deletions {
        let mech = ScramMechanism::from_type(d.mechanism).map_or("?", |m| m.name());
        let mut changes = alter(
            client,
            AlterUserScramCredentialsRequest::default().with_deletions(vec![d.clone()]),
        )
        .await?;
        for c in &mut changes {
            c.mechanism = mech.to_string();
        }
        out.extend(changes);
    }
    Ok(out)
}

async fn alter(
    client: &mut Client,
    req: AlterUserScramCredentialsRequest,
) -> Result<Vec<Change>, CliError> {
    let mechanism = req
        .upsertions
        .first()
        .map(|u| u.mechanism)
        .or(req.deletions.first().map(|d| d.mechanism))
        .and_then(ScramMechanism::from_type)
        .map_or("?", |m| m.name());
    let (resp, _) = client.call(ANY, &req, 0).await?;
    Ok(resp
        .results
        .iter()
        .map(|r| Change {
            user: r.user.to_string(),
            mechanism: mechanism.to_string(),
            error: ItemError::from_code(
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            ),
        })
        .collect())
}

/// `strom user add`: the credential written into the data dir of a broker that is not
/// running (its lock is taken).
pub fn add(a: AddArgs, password: Option<String>) -> Result<(), CliError> {
    let password = password.unwrap_or_default();
    use crate::metadata::scram::{CredentialChange, CredentialStore, FileCredentialStore};
    let m = mechanism(&a.mechanism)?;
    let iterations = iterations(a.iterations)?;
    if a.name.is_empty() || password.is_empty() {
        return Err(CliError::Usage(
            "the user and the password must not be empty".into(),
        ));
    }
    let dir = &a.data_dir;
    std::fs::create_dir_all(dir)?;
    let _lock = storage::logdir::lock(dir).map_err(|e| {
        CliError::Client(format!(
            "{} is in use ({e}): is the broker running? A running broker takes `strom user create`",
            dir.display()
        ))
    })?;
    let store = FileCredentialStore::open(dir)
        .map_err(|e| CliError::Client(format!("{}: {e}", dir.display())))?;
    let credential = crate::security::scram::credential_from_password(m, &password, iterations);
    store
        .apply(&[CredentialChange::Upsert {
            user: a.name.clone(),
            mechanism: m,
            credential,
        }])
        .map_err(|e| CliError::Client(format!("{}: {e}", dir.display())))?;
    println!(
        "{} credential of user {} written to {}",
        m.name(),
        a.name,
        dir.display()
    );
    Ok(())
}
