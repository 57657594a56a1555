//! The shared cache: the second level of the hierarchy (in-process [`crate::cache`], then this,
//! then the registry), on a Valkey or Redis server the replicas of one install share
//! (`--shared-cache redis://...` or `rediss://`). What one replica learned, the others (and a
//! restarted one) reuse, so registry load does not grow with the replica count.
//!
//! Only non-secret data goes there (docs/architecture.md, Shared cache):
//! - `noe:2:t:<key>` → the manifest digest a reference resolved to, and until when it is fresh
//!   (the tag TTL; longer for digest references), where `<key>` is an HMAC, under the install's
//!   key, of the reference after proxies and the **credential scope** it was found with: none
//!   (anonymous access) or an HMAC of the one credential that worked. A replica only finds the
//!   entries of the credentials it holds itself; nobody can tell a credential from its key.
//! - `noe:2:d:<key>` → the platforms of a manifest digest (immutable, 7 days), `<key>` an HMAC of
//!   `registry/repository@digest`.
//! - `noe:2:v:<key>` → the verification of a platform manifest digest (immutable, 30 days;
//!   docs/architecture.md "Verification"), `<key>` an HMAC of `registry/repository@digest`. Only
//!   a replica that looked the image up with its own credentials verifies it, and asks here
//!   first. A replica reads one only after it knows that digest from a
//!   tag entry of its own scope or from its own HEAD of that repository (the kubelet's KEP-2535
//!   model: knowing a digest is not permission to use it).
//!
//! Each value is stored as `MAC:value`, the MAC (HMAC-SHA256 under the install's key) covering
//! the value and its full key: whoever can write to the server but does not hold the key cannot
//! forge a value nor move one to another key. A value that does not verify is a miss, counted as
//! `unverified`, and never reaches the in-process cache.
//!
//! Reads and writes have a timeout of a few ms, and the server may send no more than the answers
//! asked for may hold (`shared/link.rs`): a server that sends more or answers late loses the connection.
//! After [`FAILURES_TO_OPEN`] failures in a row the
//! cache is not asked for [`OPEN_FOR`]; writes are sent in the background, at most
//! [`MAX_WRITES_IN_FLIGHT`] at once. Lookups never wait on it longer than the timeout and never
//! fail because of it: every failure is a miss, counted in
//! `noe_registry_shared_cache_{reads,writes}_total{result}`.

mod codec;
mod key;
mod link;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hmac;
use tokio::time::Instant;

pub use codec::{DigestValue, TagValue, VerdictValue};
pub use key::{read_key_file, read_password_file, KeyFile, KeyFileError, MAX_KEY_FILE_BYTES};
use link::{Connector, Link, FRAMING_BYTES};

use crate::metrics::Metrics;
use crate::Error;
use noe_credentials::{Credential, CredentialCandidate};

/// How long the platforms of a digest are kept (they never change).
pub const DIGEST_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a platform manifest's verification is kept (it never changes; a verdict that
/// expires is computed again, once).
pub const VERDICT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Failures in a row after which the cache is not asked for a while.
pub const FAILURES_TO_OPEN: u32 = 3;
/// How long the cache is not asked after [`FAILURES_TO_OPEN`] failures.
pub const OPEN_FOR: Duration = Duration::from_secs(5);
/// Background writes at once at most (more are dropped, and counted).
pub const MAX_WRITES_IN_FLIGHT: usize = 64;
/// Longest value read back (values are a few hundred bytes; a read never takes more).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Shortest HMAC key accepted.
pub const MIN_KEY_BYTES: usize = 16;
/// Credential scopes asked per lookup at most (the candidates, and anonymous access).
const MAX_SCOPES: usize = 16;
/// Version 2: values carry their MAC (version 1 values are not read).
const PREFIX: &str = "noe:2";
/// Hex digits of a value's MAC, before a `:` and the value.
const MAC_HEX: usize = 64;

/// How to reach the shared cache. `Debug` shows no secret.
#[derive(Clone)]
pub struct SharedConfig {
    /// `redis://host:port/db` or `rediss://...` (TLS), without a password.
    pub url: String,
    /// `AUTH` password (from a file or the environment, never a flag).
    pub password: Option<String>,
    /// Extra CA certificates (PEM) trusted for `rediss://`.
    pub ca_pem: Option<Vec<u8>>,
    /// The install's HMAC key (at least [`MIN_KEY_BYTES`]), the same on every replica.
    pub key: Vec<u8>,
    /// The permission bits of the file the key was read from, if it was (a file others may
    /// read is warned about).
    pub key_file_mode: Option<u32>,
    /// Bound on each read and write.
    pub timeout: Duration,
}

impl fmt::Debug for SharedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedConfig")
            .field("url", &self.url)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.is_some())
            .field("key", &"<redacted>")
            .field("key_file_mode", &self.key_file_mode)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Whether the server answered lately.
#[derive(Debug, Default)]
struct Health {
    failures: u32,
    open_until: Option<Instant>,
}

/// A connection to the shared cache (lazy: nothing is sent before the first lookup).
pub struct SharedCache {
    connector: Arc<Connector>,
    /// The open connection, if any (a new one is opened after a failure).
    link: Arc<tokio::sync::Mutex<Option<Link>>>,
    key: hmac::Key,
    timeout: Duration,
    health: Arc<Mutex<Health>>,
    writes: Arc<tokio::sync::Semaphore>,
    metrics: Metrics,
}

impl fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCache")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What one lookup writes back: the reference's digest for the credential that worked, and
/// the digest's platforms when they were fetched.
#[derive(Debug)]
pub struct Learned<'a> {
    /// The reference after proxies.
    pub target: &'a str,
    /// `registry/repository` after proxies.
    pub repository: &'a str,
    pub credential: Option<&'a CredentialCandidate>,
    pub digest: &'a str,
    /// How long the tag entry stays fresh.
    pub fresh_for: Duration,
    /// The platforms, when this lookup fetched them (a HEAD that confirmed a known digest
    /// writes the tag entry only).
    pub platforms: Option<DigestValue>,
}

impl SharedCache {
    /// A client for `config` (no connection is made yet). Must be called within a tokio runtime.
    pub fn new(config: &SharedConfig, metrics: Metrics) -> Result<Self, Error> {
        let invalid = |reason: String| Error::Config { reason };
        if config.key.len() < MIN_KEY_BYTES {
            return Err(invalid(format!(
                "the shared cache key must have at least {MIN_KEY_BYTES} bytes"
            )));
        }
        for warning in key::warnings(&config.key, config.key_file_mode) {
            tracing::warn!("{warning}");
        }
        let url = url::Url::parse(&config.url)
            .map_err(|e| invalid(format!("invalid shared cache URL: {e}")))?;
        if !matches!(url.scheme(), "redis" | "rediss") {
            return Err(invalid(
                "the shared cache URL must start with redis:// or rediss://".into(),
            ));
        }
        if url.password().is_some() {
            return Err(invalid(
                "the shared cache URL must not hold a password (give it in a file or the environment)"
                    .into(),
            ));
        }
        let mut info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(|e| invalid(format!("invalid shared cache URL: {e}")))?;
        if let Some(password) = &config.password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        let connector = Connector::new(info, config.ca_pem.as_deref())?;
        Ok(Self {
            connector: Arc::new(connector),
            link: Arc::default(),
            key: hmac::Key::new(hmac::HMAC_SHA256, &config.key),
            timeout: config.timeout,
            health: Arc::default(),
            writes: Arc::new(tokio::sync::Semaphore::new(MAX_WRITES_IN_FLIGHT)),
            metrics,
        })
    }

    /// The first of `scopes` (credentials in order; `None`: anonymous access) under which
    /// `target` has a fresh digest, with that scope's index and how long it stays fresh.
    pub async fn tag(
        &self,
        target: &str,
        scopes: &[Option<&CredentialCandidate>],
    ) -> Option<(usize, String, Duration)> {
        let scopes = scopes.get(..scopes.len().min(MAX_SCOPES))?;
        let keys: Vec<String> = scopes.iter().map(|c| self.tag_key(target, *c)).collect();
        let values = self.read(&keys).await?;
        let now = unix_ms();
        let found = values
            .iter()
            .zip(&keys)
            .enumerate()
            .find_map(|(i, (bytes, key))| {
                let value = TagValue::decode(self.open(key, bytes)?)?;
                let left = value.expires_unix_ms.checked_sub(now)?;
                Some((i, value.digest, Duration::from_millis(left)))
            });
        self.count_read(if found.is_some() { "hit" } else { "miss" });
        found
    }

    /// The platforms of `digest` of `repository` (`registry/repository`), if known.
    pub async fn platforms(&self, repository: &str, digest: &str) -> Option<DigestValue> {
        self.read_one(self.digest_key(repository, digest), DigestValue::decode)
            .await
    }

    /// The verification of the platform manifest `digest` of `repository`
    /// (`registry/repository`), if a replica kept one.
    pub async fn verdict(&self, repository: &str, digest: &str) -> Option<VerdictValue> {
        self.read_one(self.verdict_key(repository, digest), VerdictValue::decode)
            .await
    }

    /// Keeps a platform manifest's verification for every replica, in the background.
    pub fn remember_verdict(&self, repository: &str, digest: &str, value: &VerdictValue) {
        let Some(permit) = self.write_permit() else {
            return;
        };
        let key = self.verdict_key(repository, digest);
        let ttl_ms = u64::try_from(VERDICT_TTL.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        self.set(&mut pipe, &key, &value.encode(), ttl_ms);
        self.send(pipe, 1, permit);
    }

    /// Writes what a lookup learned, in the background (never waited for).
    pub fn remember(&self, learned: &Learned<'_>) {
        let Some(permit) = self.write_permit() else {
            return;
        };
        let fresh_ms = u64::try_from(learned.fresh_for.as_millis()).unwrap_or(u64::MAX);
        if fresh_ms == 0 {
            return;
        }
        let tag = TagValue {
            digest: learned.digest.to_owned(),
            expires_unix_ms: unix_ms().saturating_add(fresh_ms),
        };
        let mut pipe = redis::pipe();
        let tag_key = self.tag_key(learned.target, learned.credential);
        self.set(&mut pipe, &tag_key, &tag.encode(), fresh_ms);
        if let Some(platforms) = &learned.platforms {
            let digest_ms = u64::try_from(DIGEST_TTL.as_millis()).unwrap_or(u64::MAX);
            let digest_key = self.digest_key(learned.repository, learned.digest);
            self.set(&mut pipe, &digest_key, &platforms.encode(), digest_ms);
        }
        let answers = if learned.platforms.is_some() { 2 } else { 1 };
        self.send(pipe, answers, permit);
    }

    /// A slot for one background write, or `None` (counted) when the cache is skipped or too
    /// many writes are in flight.
    fn write_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if self.is_open() {
            self.count_write("bypassed");
            return None;
        }
        let permit = self.writes.clone().try_acquire_owned().ok();
        if permit.is_none() {
            self.count_write("dropped");
        }
        permit
    }

    /// Adds `SET key sealed(value) PX ttl_ms` to `pipe`.
    fn set(&self, pipe: &mut redis::Pipeline, key: &str, value: &[u8], ttl_ms: u64) {
        pipe.cmd("SET")
            .arg(key)
            .arg(self.seal(key, value))
            .arg("PX")
            .arg(ttl_ms)
            .ignore();
    }

    /// Sends the writes in `pipe` (`answers` of them) in the background, holding `permit`
    /// until they are answered.
    fn send(&self, pipe: redis::Pipeline, answers: u64, permit: tokio::sync::OwnedSemaphorePermit) {
        let (connector, link) = (self.connector.clone(), self.link.clone());
        let (timeout, health, metrics) = (self.timeout, self.health.clone(), self.metrics.clone());
        tokio::spawn(async move {
            let most = answers.saturating_mul(FRAMING_BYTES);
            let ok = query::<()>(&connector, &link, &pipe, most, timeout)
                .await
                .is_ok();
            record(&health, ok);
            metrics
                .shared_writes
                .with_label_values(&[if ok { "ok" } else { "error" }])
                .inc();
            drop(permit);
        });
    }

    /// The value under `key`, if present, verified and decoded by `decode`; counted as a hit
    /// or a miss.
    async fn read_one<T>(&self, key: String, decode: fn(&[u8]) -> Option<T>) -> Option<T> {
        let values = self.read(std::slice::from_ref(&key)).await?;
        let found = values
            .first()
            .and_then(|bytes| decode(self.open(&key, bytes)?));
        self.count_read(if found.is_some() { "hit" } else { "miss" });
        found
    }

    /// `GETRANGE 0 MAX` of each key (empty when absent), in one round trip; `None` when the
    /// cache is skipped or failed.
    async fn read(&self, keys: &[String]) -> Option<Vec<Vec<u8>>> {
        if self.is_open() {
            self.count_read("bypassed");
            return None;
        }
        let end = isize::try_from(MAX_VALUE_BYTES).unwrap_or(isize::MAX) - 1;
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("GETRANGE").arg(key).arg(0).arg(end);
        }
        let each = u64::try_from(MAX_VALUE_BYTES)
            .unwrap_or(u64::MAX)
            .saturating_add(FRAMING_BYTES);
        let most = each.saturating_mul(u64::try_from(keys.len()).unwrap_or(u64::MAX));
        let answer =
            query::<Vec<Vec<u8>>>(&self.connector, &self.link, &pipe, most, self.timeout).await;
        match answer {
            Ok(values) if values.len() == keys.len() => {
                record(&self.health, true);
                Some(values)
            }
            Ok(_) | Err(_) => {
                if let Err(error) = &answer {
                    tracing::debug!(%error, "shared cache read failed");
                }
                record(&self.health, false);
                self.count_read("error");
                None
            }
        }
    }

    fn is_open(&self) -> bool {
        let health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        health
            .open_until
            .is_some_and(|until| until > Instant::now())
    }

    fn tag_key(&self, target: &str, credential: Option<&CredentialCandidate>) -> String {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(b"tag\0");
        context.update(target.as_bytes());
        context.update(b"\0");
        match credential {
            None => context.update(b"anonymous"),
            Some(candidate) => {
                // The credential goes into the HMAC only (keyed: nothing can be recovered).
                context.update(b"credential\0");
                context.update(candidate.mirror.as_deref().unwrap_or("").as_bytes());
                match &candidate.credential {
                    Credential::Basic { username, password } => {
                        context.update(b"\0basic\0");
                        context.update(username.as_bytes());
                        context.update(b"\0");
                        context.update(password.as_bytes());
                    }
                    Credential::IdentityToken(token) => {
                        context.update(b"\0identity\0");
                        context.update(token.as_bytes());
                    }
                    Credential::RegistryToken(token) => {
                        context.update(b"\0registry\0");
                        context.update(token.as_bytes());
                    }
                }
            }
        }
        format!("{PREFIX}:t:{}", hex::encode(context.sign().as_ref()))
    }

    fn verdict_key(&self, repository: &str, digest: &str) -> String {
        self.manifest_key(b"verdict\0", 'v', repository, digest)
    }

    fn digest_key(&self, repository: &str, digest: &str) -> String {
        self.manifest_key(b"digest\0", 'd', repository, digest)
    }

    /// `PREFIX:kind:MAC`, the MAC (hex) of `domain`, `repository`, `@` and `digest` under the
    /// install's key.
    fn manifest_key(&self, domain: &[u8], kind: char, repository: &str, digest: &str) -> String {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(domain);
        context.update(repository.as_bytes());
        context.update(b"@");
        context.update(digest.as_bytes());
        format!("{PREFIX}:{kind}:{}", hex::encode(context.sign().as_ref()))
    }

    /// `MAC:value`, the MAC (hex) of the value together with its full key under the install's
    /// key: a value cannot be forged, nor moved to another key, without the key.
    fn seal(&self, key: &str, value: &[u8]) -> Vec<u8> {
        let mac = hex::encode(self.value_mac(key, value).as_ref());
        let mut sealed =
            Vec::with_capacity(mac.len().saturating_add(1).saturating_add(value.len()));
        sealed.extend_from_slice(mac.as_bytes());
        sealed.push(b':');
        sealed.extend_from_slice(value);
        sealed
    }

    /// The value sealed under `key` in `sealed`, if its MAC verifies. An absent key (empty) is
    /// a miss; a value that does not verify is one too, counted as `unverified`.
    fn open<'v>(&self, key: &str, sealed: &'v [u8]) -> Option<&'v [u8]> {
        if sealed.is_empty() {
            return None;
        }
        let verified = sealed
            .get(..MAC_HEX)
            .and_then(|mac| hex::decode(mac).ok())
            .zip(sealed.get(MAC_HEX.saturating_add(1)..))
            .filter(|_| sealed.get(MAC_HEX) == Some(&b':'))
            .filter(|(mac, value)| hmac::verify(&self.key, &value_message(key, value), mac).is_ok())
            .map(|(_, value)| value);
        if verified.is_none() {
            self.count_read("unverified");
        }
        verified
    }

    fn value_mac(&self, key: &str, value: &[u8]) -> hmac::Tag {
        hmac::sign(&self.key, &value_message(key, value))
    }

    fn count_read(&self, result: &'static str) {
        self.metrics.shared_reads.with_label_values(&[result]).inc();
    }

    fn count_write(&self, result: &'static str) {
        self.metrics
            .shared_writes
            .with_label_values(&[result])
            .inc();
    }
}

/// Sends `pipe` on the open connection (opening one first when there is none) and reads its
/// answers, which may hold `most` bytes at most, within `timeout`. A connection that failed,
/// sent more or did not answer in time is closed and forgotten: the next query opens another.
async fn query<T: redis::FromRedisValue>(
    connector: &Connector,
    link: &tokio::sync::Mutex<Option<Link>>,
    pipe: &redis::Pipeline,
    most: u64,
    timeout: Duration,
) -> Result<T, QueryError> {
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(3600));
    let open = tokio::time::timeout_at(deadline, async {
        let mut slot = link.lock().await;
        match slot.as_ref() {
            Some(open) if !open.meter.is_closed() => Ok(open.clone()),
            _ => {
                *slot = None;
                let open = connector.connect().await?;
                *slot = Some(open.clone());
                Ok::<_, std::io::Error>(open)
            }
        }
    })
    .await
    .map_err(|_| QueryError::TimedOut)?
    .map_err(QueryError::Io)?;
    let Link {
        mut connection,
        meter,
    } = open;
    let expecting = meter.expect(most);
    let answer = tokio::time::timeout_at(deadline, pipe.query_async::<T>(&mut connection)).await;
    drop(expecting);
    match answer {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            if error.is_io_error() || error.is_unrecoverable_error() {
                meter.close();
            }
            Err(QueryError::Redis(error))
        }
        Err(_) => {
            // Whatever it sends late is not read.
            meter.close();
            Err(QueryError::TimedOut)
        }
    }
}

/// Why a query got no answer (logged at debug level only).
#[derive(Debug, thiserror::Error)]
enum QueryError {
    #[error("no answer in time")]
    TimedOut,
    #[error("cannot connect: {0}")]
    Io(std::io::Error),
    #[error(transparent)]
    Redis(redis::RedisError),
}

/// What a value's MAC covers: a domain, the full key, the value.
fn value_message(key: &str, value: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(key.len().saturating_add(value.len()).saturating_add(8));
    message.extend_from_slice(b"value\0");
    message.extend_from_slice(key.as_bytes());
    message.push(0);
    message.extend_from_slice(value);
    message
}

/// Records an answer (or a failure) of the server; [`FAILURES_TO_OPEN`] failures in a row stop
/// asking it for [`OPEN_FOR`].
fn record(health: &Mutex<Health>, ok: bool) {
    let mut health = health.lock().unwrap_or_else(|e| e.into_inner());
    if ok {
        health.failures = 0;
        health.open_until = None;
        return;
    }
    health.failures = health.failures.saturating_add(1);
    if health.failures >= FAILURES_TO_OPEN {
        let now = Instant::now();
        if health.open_until.is_none_or(|until| until <= now) {
            tracing::warn!(
                failures = health.failures,
                "shared cache not answering: lookups go to the registries without it for a while"
            );
        }
        health.open_until = now.checked_add(OPEN_FOR);
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
