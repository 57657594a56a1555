//! Driving a server with `wrk` and reading its report.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};

/// What one wrk run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    /// Non-2xx answers plus socket errors.
    pub errors: u64,
    /// CPU time the server spent per request, in µs (its user + system time over the run).
    pub server_cpu_us: f64,
}

/// Writes the Lua script POSTing `body` to `/mutate`.
pub fn script(dir: &Path, body: &str) -> anyhow::Result<std::path::PathBuf> {
    if body.contains("]==]") {
        bail!("body cannot be embedded in a Lua long string");
    }
    let path = dir.join("post.lua");
    std::fs::write(
        &path,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [==[{body}]==]\n"
        ),
    )?;
    Ok(path)
}

/// A Lua long string holding `text`.
fn long_string(text: &str) -> anyhow::Result<String> {
    if text.contains("]==]") {
        bail!("text cannot be embedded in a Lua long string");
    }
    Ok(format!("[==[{text}]==]"))
}

/// The script's first lines: the method, the path, the headers; and `setup` numbering the
/// threads (`id`, from 1).
fn preamble(path: &str, headers: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut lua = format!("wrk.method = \"POST\"\nwrk.path = {}\n", long_string(path)?);
    for (name, value) in headers {
        // Spaces inside the brackets: `[[` would open a Lua long string.
        lua.push_str(&format!(
            "wrk.headers[ {} ] = {}\n",
            long_string(name)?,
            long_string(value)?
        ));
    }
    lua.push_str("local threads = 0\nfunction setup(thread)\n  threads = threads + 1\n  thread:set(\"id\", threads)\nend\n");
    Ok(lua)
}

/// A wrk script POSTing `body` to `path`, built by a Lua `request` function for each request.
/// With `vary`, every `marker` in `body` is replaced by a value no other request of the run has
/// (the thread's number and its count of requests); else by `0-0`, the same body every time,
/// built the same way (so the client does the same work in both).
pub fn script_each(
    dir: &Path,
    name: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    marker: &str,
    vary: bool,
) -> anyhow::Result<std::path::PathBuf> {
    let parts = body
        .split(marker)
        .map(long_string)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut lua = preamble(path, headers)?;
    lua.push_str(&format!("local parts = {{ {} }}\n", parts.join(", ")));
    if vary {
        lua.push_str("local n = 0\nrequest = function()\n  n = n + 1\n  return wrk.format(nil, nil, nil, table.concat(parts, id .. \"-\" .. n))\nend\n");
    } else {
        lua.push_str("local fixed = table.concat(parts, \"0-0\")\nrequest = function()\n  return wrk.format(nil, nil, nil, fixed)\nend\n");
    }
    let file = dir.join(format!("{name}.lua"));
    std::fs::write(&file, lua)?;
    Ok(file)
}

/// A wrk script POSTing `head`, the `items` joined by commas, then `tail`, to `path`, built by a
/// Lua `request` function for each request. With `shuffle`, the items are shuffled before each
/// request (a Lehmer generator seeded by the thread's number), so every body is new while
/// holding the same items; else they keep their order, the same body every time, built the
/// same way.
pub fn script_shuffled(
    dir: &Path,
    name: &str,
    path: &str,
    headers: &[(&str, &str)],
    (head, items, tail): (&str, &[String], &str),
    shuffle: bool,
) -> anyhow::Result<std::path::PathBuf> {
    let items = items
        .iter()
        .map(|item| long_string(item))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut lua = preamble(path, headers)?;
    lua.push_str(&format!(
        "local head = {}\nlocal tail = {}\nlocal items = {{ {} }}\n",
        long_string(head)?,
        long_string(tail)?,
        items.join(", ")
    ));
    if shuffle {
        lua.push_str("local x = nil\nrequest = function()\n  if x == nil then x = id * 7919 + 1 end\n  for i = #items, 2, -1 do\n    x = (x * 48271) % 2147483647\n    local j = x % i + 1\n    items[i], items[j] = items[j], items[i]\n  end\n  return wrk.format(nil, nil, nil, head .. table.concat(items, \",\") .. tail)\nend\n");
    } else {
        lua.push_str("local fixed = head .. table.concat(items, \",\") .. tail\nrequest = function()\n  return wrk.format(nil, nil, nil, fixed)\nend\n");
    }
    let file = dir.join(format!("{name}.lua"));
    std::fs::write(&file, lua)?;
    Ok(file)
}

/// The median of some figures, and their least and greatest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Self {
            median,
            min: values.first().copied().unwrap_or(f64::NAN),
            max: values.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// `median (min–max)` with `decimals` decimals.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.*} ({:.*}–{:.*})",
            decimals, self.median, decimals, self.min, decimals, self.max
        )
    }
}

/// Runs `wrk --latency` against `https://addr/mutate`.
pub async fn run(
    addr: SocketAddr,
    script: &Path,
    threads: u32,
    connections: u32,
    duration: Duration,
) -> anyhow::Result<Report> {
    let output = tokio::process::Command::new("wrk")
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{}s", duration.as_secs()))
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(format!("https://{addr}/mutate"))
        .output()
        .await
        .context("running wrk (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let report = parse(&text).with_context(|| format!("reading the wrk report:\n{text}"))?;
    // wrk runs on with its defaults (a GET of `/`) when the script does not load, and reports
    // every answer as an error: never a figure.
    if report.requests > 0 && report.errors >= report.requests {
        bail!(
            "every request of wrk failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(report)
}

/// Parses wrk's text report.
pub fn parse(text: &str) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let mut in_distribution = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Requests/sec:") {
            report.requests_per_second = rest.trim().parse()?;
        } else if trimmed.starts_with("Latency Distribution") {
            in_distribution = true;
        } else if in_distribution && trimmed.starts_with("50%") {
            report.p50_ms = duration_ms(trimmed.trim_start_matches("50%").trim())?;
        } else if in_distribution && trimmed.starts_with("99%") {
            report.p99_ms = duration_ms(trimmed.trim_start_matches("99%").trim())?;
            in_distribution = false;
        } else if trimmed.contains("requests in") {
            report.requests = trimmed
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .parse()?;
        } else if let Some(rest) = trimmed.strip_prefix("Non-2xx or 3xx responses:") {
            report.errors += rest.trim().parse::<u64>()?;
        } else if let Some(rest) = trimmed.strip_prefix("Socket errors:") {
            for part in rest.split(',') {
                if let Some(n) = part.split_whitespace().nth(1) {
                    report.errors += n.parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    if report.requests_per_second == 0.0 || report.p99_ms == 0.0 {
        bail!("no throughput or latency in the report");
    }
    Ok(report)
}

/// `812.00us`, `1.23ms`, `2.01s` → milliseconds.
fn duration_ms(text: &str) -> anyhow::Result<f64> {
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        bail!("unknown duration {text:?}");
    };
    Ok(number.parse::<f64>()? * factor)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_wrk_report() {
        let text = "Running 10s test @ https://127.0.0.1:1/mutate
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms  512.00us  20.00ms   90.00%
    Req/Sec    31.00k     2.00k   35.00k    70.00%
  Latency Distribution
     50%  812.00us
     75%    1.20ms
     90%    1.80ms
     99%    3.10ms
  617000 requests in 10.00s, 150.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  61700.12
Transfer/sec:     15.00MB
";
        let report = parse(text).unwrap();
        assert_eq!(report.requests, 617_000);
        assert!((report.requests_per_second - 61_700.12).abs() < 1e-6);
        assert!((report.p50_ms - 0.812).abs() < 1e-9);
        assert!((report.p99_ms - 3.1).abs() < 1e-9);
        assert_eq!(report.errors, 7);
    }

    #[test]
    fn spreads() {
        let odd = Spread::of([3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!((odd.median, odd.min, odd.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Spread::of([0.5, 0.25]).show(2), "0.38 (0.25–0.50)");
    }

    #[test]
    fn varying_scripts_split_the_body_at_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let path = script_each(
            dir.path(),
            "v",
            "/mutate",
            &[("A", "b")],
            "{\"x\":\"@\",\"y\":\"@\"}",
            "@",
            true,
        )
        .unwrap();
        let lua = std::fs::read_to_string(path).unwrap();
        assert!(
            lua.contains("local parts = { [==[{\"x\":\"]==], [==[\",\"y\":\"]==], [==[\"}]==] }"),
            "{lua}"
        );
        assert!(lua.contains("id .. \"-\" .. n"), "{lua}");
        assert!(
            lua.contains("wrk.headers[ [==[A]==] ] = [==[b]==]\n"),
            "a header's name is an index, not a long string: {lua}"
        );
        assert!(!lua.contains("[[") && !lua.contains("]]"), "{lua}");
        assert!(script_each(dir.path(), "bad", "/", &[], "]==]", "@", true).is_err());
    }
}
