//! The election loop (client-go's algorithm): every retry period, read the Lease; create it if
//! absent; if it is ours or expired by our clock, write it back with us as holder, conditional
//! on the `resourceVersion` just read (a `409` means another replica won the round). A
//! successful write keeps us leading until `round start + renew deadline`. A `409` on the
//! renewal of a lease we hold is not a loss: the lease is read again and, while it still names
//! us, the renewal is retried (a few times, after a short jittered pause); we step down only
//! when another holder is really there, or when the renew deadline passes. Rounds of a replica
//! that does not lead are spaced by the retry period plus up to 1.2 times it of jitter
//! (client-go's factor), so replicas do not poll in lockstep. On shutdown a held lease is
//! released so another replica takes over at once.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::chrono::Utc;
use kube::api::PostParams;
use kube::Api;
use tokio::time::Instant;

use super::{decide, Attempt, LeadershipWriter, Observed};
use crate::shutdown::Shutdown;
use crate::{Error, LeaseConfig, Metrics};

/// The jitter factor on the rounds of a replica that does not lead (client-go's `JitterFactor`).
const ACQUIRE_JITTER: f64 = 1.2;
/// Fresh reads and renewals tried after our own renewal met a `409`.
const CONFLICT_RETRIES: u32 = 3;

/// Runs the election until `shutdown`, then releases a held lease.
pub(crate) async fn run(
    client: kube::Client,
    config: LeaseConfig,
    writer: LeadershipWriter,
    metrics: Metrics,
    mut shutdown: Shutdown,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observed: Option<Observed> = None;
    let mut deadline: Option<Instant> = None;
    loop {
        let started = Instant::now();
        let round = tokio::time::timeout(
            config.renew_deadline,
            round(&api, &config, &mut observed, started),
        );
        let held = match round.await {
            Ok(Ok(held)) => Some(held),
            Ok(Err(error)) => {
                tracing::warn!(%error, lease = %config.name, "leader election round failed");
                None
            }
            Err(_) => {
                tracing::warn!(lease = %config.name, "leader election round timed out");
                None
            }
        };
        match held {
            Some(true) => {
                if deadline.is_none_or(|until| until <= Instant::now()) {
                    tracing::info!(lease = %config.name, identity = %config.identity, "started leading");
                    metrics.transitions.inc();
                }
                let until = started
                    .checked_add(config.renew_deadline)
                    .unwrap_or(started);
                deadline = Some(until);
                writer.lead_until(until);
                metrics.leader.set(1);
            }
            Some(false) => {
                if deadline.take().is_some() {
                    tracing::warn!(lease = %config.name, "lost the lease to another replica");
                }
                writer.step_down();
                metrics.leader.set(0);
            }
            None => {
                // Keep leading until the renew deadline (the Leadership view enforces it too).
                if deadline.is_some_and(|until| until <= Instant::now()) {
                    tracing::warn!(lease = %config.name, "could not renew the lease before the renew deadline: stopped leading");
                    deadline = None;
                    writer.step_down();
                    metrics.leader.set(0);
                }
            }
        }
        let pause = if deadline.is_some() {
            // Renewals keep their period: jitter could push one past the renew deadline.
            config.retry_period
        } else {
            crate::jitter::up(config.retry_period, ACQUIRE_JITTER, crate::jitter::seed())
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shutdown.wait() => break,
        }
    }
    writer.step_down();
    metrics.leader.set(0);
    if deadline.is_some() {
        match tokio::time::timeout(config.renew_deadline, release(&api, &config)).await {
            Ok(Ok(())) => tracing::info!(lease = %config.name, "released the lease"),
            Ok(Err(error)) => tracing::warn!(%error, "could not release the lease"),
            Err(_) => tracing::warn!("releasing the lease timed out"),
        }
    }
}

fn seconds(duration: std::time::Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

/// One round; `Ok(true)` when we hold the lease after it.
async fn round(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Option<Observed>,
    now: Instant,
) -> Result<bool, Error> {
    let action = || format!("lease {}/{}", config.namespace, config.name);
    let current = api
        .get_opt(&config.name)
        .await
        .map_err(|source| Error::kube(format!("reading {}", action()), source))?;
    let Some(mut lease) = current else {
        let time = MicroTime(Utc::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(seconds(config.lease_duration)),
                acquire_time: Some(time.clone()),
                renew_time: Some(time),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(source) => Err(Error::kube(format!("creating {}", action()), source)),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let renew_time = spec
        .renew_time
        .as_ref()
        .map(|time| time.0.to_rfc3339())
        .unwrap_or_default();
    let attempt = decide(
        &config.identity,
        spec.holder_identity.as_deref().unwrap_or_default(),
        &renew_time,
        spec.lease_duration_seconds.unwrap_or(0),
        spec.lease_transitions.unwrap_or(0),
        observed,
        now,
    );
    let Attempt::Write {
        transitions,
        acquire,
    } = attempt
    else {
        return Ok(false);
    };
    let time = MicroTime(Utc::now());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(seconds(config.lease_duration)),
        acquire_time: if acquire {
            Some(time.clone())
        } else {
            spec.acquire_time
        },
        renew_time: Some(time),
        lease_transitions: Some(transitions),
        ..spec
    });
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        // Another replica won the race for a lease that was free or expired.
        Err(kube::Error::Api(status)) if status.code == 409 && acquire => Ok(false),
        // Our own renewal: the record changed under us, maybe only its resourceVersion.
        Err(kube::Error::Api(status)) if status.code == 409 => renew_again(api, config).await,
        Err(source) => Err(Error::kube(format!("writing {}", action()), source)),
    }
}

/// After a `409` on the renewal of a lease we hold: read it again; while it still names us,
/// write the renewal on that version (after a jittered pause of an eighth to a quarter of the
/// retry period). `Ok(false)` only when another replica holds it; an error when it kept conflicting
/// (the caller then keeps leading until the renew deadline, as after any failed round).
async fn renew_again(api: &Api<Lease>, config: &LeaseConfig) -> Result<bool, Error> {
    let action = || format!("renewing lease {}/{}", config.namespace, config.name);
    for _ in 0..CONFLICT_RETRIES {
        // An eighth to a quarter of the retry period.
        let pause = crate::jitter::up(config.retry_period / 8, 1.0, crate::jitter::seed());
        tokio::time::sleep(pause).await;
        let Some(mut lease) = api
            .get_opt(&config.name)
            .await
            .map_err(|source| Error::kube(action(), source))?
        else {
            // Deleted meanwhile: the next round creates it again.
            return Err(Error::Incomplete(action()));
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if !still_ours(&config.identity, spec.holder_identity.as_deref()) {
            return Ok(false);
        }
        lease.spec = Some(LeaseSpec {
            lease_duration_seconds: Some(seconds(config.lease_duration)),
            renew_time: Some(MicroTime(Utc::now())),
            ..spec
        });
        match api
            .replace(&config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => return Err(Error::kube(action(), source)),
        }
    }
    Err(Error::Conflict {
        action: action(),
        attempts: CONFLICT_RETRIES,
    })
}

/// Whether a lease read after a conflict is still ours to renew.
pub(crate) fn still_ours(identity: &str, holder: Option<&str>) -> bool {
    holder == Some(identity)
}

/// Gives the lease up: no holder, a one-second duration (client-go's release).
async fn release(api: &Api<Lease>, config: &LeaseConfig) -> Result<(), Error> {
    let action = format!("releasing lease {}/{}", config.namespace, config.name);
    let Some(mut lease) = api
        .get_opt(&config.name)
        .await
        .map_err(|source| Error::kube(action.clone(), source))?
    else {
        return Ok(());
    };
    let spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    let time = MicroTime(Utc::now());
    lease.spec = Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(time.clone()),
        renew_time: Some(time),
        ..spec
    });
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::kube(action, source)),
    }
}
