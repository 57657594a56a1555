//! One bounded read of a container's previous log: `GET pods/NAME/log?container=C&previous=true
//! &limitBytes=2048`, at most [`MAX_READ`] bytes kept whatever the endpoint sends (it may ignore
//! the limit, stream forever or hang), within a deadline.

use futures::AsyncReadExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use kube::Api;

/// `limitBytes` asked for.
pub const LIMIT_BYTES: i64 = 2048;
/// Bytes kept at most (the limit, and a little for a line cut by it).
const MAX_READ: u64 = 2048 + 512;

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The log's first bytes.
    Text(Vec<u8>),
    /// The container has no previous run, or the pod is gone: nothing to read.
    NotFound,
    /// The deadline passed; the bytes read until then.
    TimedOut(Vec<u8>),
    /// The API answered an error.
    Failed(String),
}

impl Read {
    /// Metric label (`noe_exec_format_log_reads_total{result}`) when nothing matched.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Text(_) => "no_match",
            Self::NotFound => "not_found",
            Self::TimedOut(_) => "timeout",
            Self::Failed(_) => "error",
        }
    }

    /// What was read.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Self::Text(bytes) | Self::TimedOut(bytes) => bytes,
            Self::NotFound | Self::Failed(_) => &[],
        }
    }
}

/// Reads the previous log of `container` of `namespace/pod`, within `deadline`.
pub(crate) async fn previous(
    client: kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    deadline: std::time::Duration,
) -> Read {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let params = LogParams {
        container: Some(container.to_owned()),
        previous: true,
        limit_bytes: Some(LIMIT_BYTES),
        ..LogParams::default()
    };
    let mut buffer = Vec::new();
    let read = async {
        let stream = api.log_stream(pod, &params).await?;
        let mut limited = stream.take(MAX_READ);
        // Chunk by chunk, so what arrived before a deadline is kept.
        let mut chunk = [0u8; 512];
        loop {
            let n = limited
                .read(&mut chunk)
                .await
                .map_err(kube::Error::ReadEvents)?;
            if n == 0 {
                return Ok::<(), kube::Error>(());
            }
            buffer.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    };
    let result = tokio::time::timeout(deadline, read).await;
    match result {
        Ok(Ok(())) => Read::Text(buffer),
        // The kubelet answers `400 previous terminated container "C" in pod "P" not found` for a
        // container without a previous run; `404` when the pod is gone.
        Ok(Err(kube::Error::Api(status)))
            if status.code == 404
                || (status.code == 400 && status.message.ends_with("not found")) =>
        {
            Read::NotFound
        }
        Ok(Err(error)) => Read::Failed(crate::Error::chain(&error)),
        Err(_) => Read::TimedOut(buffer),
    }
}
