//! `noe report -o html` in a real browser (Debian's `chromium`, headless, driven over the
//! DevTools protocol by test-support's `Browser`): the page's figures are the JSON report's for
//! the same input; the column buttons sort and the filters hide rows, from the keyboard; a
//! hostile name is text and no script from the data runs; without script the tables are all
//! there; a screenshot is left under `target/tmp/report-html/` for people to look at.
//!
//! Without a browser the test fails, unless `NOE_TEST_NO_BROWSER` says none can be installed
//! here (scripts/test.sh sets it only when `apt-get install chromium` failed): then it says so
//! and checks nothing.

use std::path::Path;

use super::harness::run_noe as noe;
use noe_test_support::{push_versions, Browser, Registry};
use serde_json::{json, Value};

const HOSTILE_NAME: &str = "<img src=x onerror=alert(1)>";
const HOSTILE_NAMESPACE: &str = "\"><script>window.__pwned=1</script>";

async fn push(registry: &Registry, repository: &str, versions: &[(&str, bool)]) {
    push_versions(&registry.pusher().unwrap(), repository, versions)
        .await
        .unwrap();
}

fn deployment(name: &str, namespace: &str, images: &[String], replicas: u64, cpu: &str) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            json!({"name": format!("c{i}"), "image": image,
                   "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}})
        })
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}}
    })
}

/// The browser, or `None` when none can be installed here (said on stderr).
pub(super) fn browser() -> Option<Browser> {
    let Some(binary) = Browser::find() else {
        if std::env::var_os("NOE_TEST_NO_BROWSER").is_some() {
            eprintln!("SKIPPED: no chromium here and none could be installed (NOE_TEST_NO_BROWSER): the HTML report was not checked in a browser");
            return None;
        }
        panic!("chromium not found: install Debian's chromium (scripts/test.sh does), point NOE_TEST_CHROMIUM at one, or set NOE_TEST_NO_BROWSER=1 where none can be installed");
    };
    Some(Browser::start(&binary, 1280, 900).unwrap())
}

/// The `summary` value a `data-figure` names (`arm64.requests.ready.cpu`), as its text.
fn json_figure(summary: &Value, figure: &str) -> String {
    let mut at = summary;
    for key in figure.split('.') {
        at = match key.parse::<usize>() {
            Ok(i) => &at[i],
            Err(_) => &at[key],
        };
    }
    match at {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The names of the workload rows shown, in order.
const VISIBLE_NAMES: &str =
    "[...document.querySelectorAll('#workloads tbody tr:not([hidden]) th')].map(th => th.textContent)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_in_a_browser() {
    let Some(mut browser) = browser() else {
        return;
    };
    let registry = Registry::start().await.unwrap();
    push(
        &registry,
        "shop/web",
        &[
            ("1.0.0", false),
            ("1.1.0", false),
            ("1.2.0", true),
            ("1.3.0", true),
        ],
    )
    .await;
    push(&registry, "legacy/batch", &[("7", false)]).await;
    push(&registry, "base/multi", &[("2.0.0", true)]).await;
    let web = registry.reference("shop/web", "1.0.0");
    let batch = registry.reference("legacy/batch", "7");
    let multi = registry.reference("base/multi", "2.0.0");
    let missing = registry.reference("gone/app", "1");
    let mut objects: Vec<Value> = Vec::new();
    for i in 0..12 {
        let image = match i % 3 {
            0 => web.clone(),
            1 => multi.clone(),
            _ => batch.clone(),
        };
        objects.push(deployment(
            &format!("svc-{i:02}"),
            &format!("team-{}", i % 4),
            &[image],
            1 + i % 3,
            &format!("{}m", 100 * (1 + i % 5)),
        ));
    }
    objects.push(deployment(
        HOSTILE_NAME,
        HOSTILE_NAMESPACE,
        &[multi.clone(), batch.clone()],
        2,
        "1",
    ));
    objects.push(deployment("lost", "team-0", &[missing], 1, "50m"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workloads.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
    )
    .unwrap();
    let absent = dir.path().join("absent");
    let run = |format: &'static str| {
        let args = vec![
            "report".to_owned(),
            format!("-o={format}"),
            format!("-f={}", file.display()),
            "--target-arch=arm64,amd64".to_owned(),
            format!("--insecure-registries={}", registry.host()),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", absent.display()),
            format!("--containerd-config-path={}", absent.display()),
        ];
        async move { noe(&args).await }
    };
    let (code, json_out, stderr) = run("json").await;
    assert_eq!(code, 0, "{stderr}");
    let (code, html, stderr) = run("html").await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&json_out).unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let url = format!("file://{}", page.display());

    let took = browser.open(&url).unwrap();
    eprintln!("the page loaded and painted in {took:?}");
    // The script ran under the page's Content-Security-Policy: the controls are shown.
    assert_eq!(
        browser
            .eval("document.getElementById('controls').hidden")
            .unwrap(),
        false
    );

    // Every figure is the JSON report's.
    let figures = browser
        .eval("[...document.querySelectorAll('data[data-figure]')].map(d => [d.dataset.figure, d.value])")
        .unwrap();
    let figures = figures.as_array().unwrap();
    assert!(figures.len() >= 2 * 4 * 4, "{figures:?}");
    for pair in figures {
        let (figure, value) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        assert_eq!(json_figure(&report["summary"], figure), value, "{figure}");
    }
    // The rows are the JSON's items, in its order.
    let names = browser.eval(VISIBLE_NAMES).unwrap();
    let json_names: Vec<Value> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].clone())
        .collect();
    assert_eq!(names, Value::Array(json_names.clone()));

    // A hostile name is text; nothing from the data ran.
    assert_eq!(
        browser
            .eval("document.querySelectorAll('img').length")
            .unwrap(),
        0
    );
    assert_eq!(browser.eval("typeof window.__pwned").unwrap(), "undefined");
    assert_eq!(browser.dialogs(), 0);
    assert_eq!(browser.eval("document.scripts.length").unwrap(), 1);
    let shown = browser
        .eval(&format!(
            "[...document.querySelectorAll('#workloads th')].some(th => th.textContent === {})",
            Value::String(HOSTILE_NAME.into())
        ))
        .unwrap();
    assert_eq!(shown, true, "the hostile name is shown as its text");

    // Sorting from the keyboard: the Name column's button, Enter, then Enter again.
    browser
        .eval("document.querySelector('th[data-key=name] button').focus()")
        .unwrap();
    browser.press("Enter").unwrap();
    let ascending: Vec<String> =
        serde_json::from_value(browser.eval(VISIBLE_NAMES).unwrap()).unwrap();
    let mut sorted = ascending.clone();
    sorted.sort_by_key(|n| n.to_lowercase());
    assert_eq!(ascending.first(), sorted.first(), "{ascending:?}");
    assert_ne!(
        Value::from(ascending.clone()),
        Value::Array(json_names.clone())
    );
    assert_eq!(
        browser
            .eval("document.querySelector('th[data-key=name]').getAttribute('aria-sort')")
            .unwrap(),
        "ascending"
    );
    browser.press("Enter").unwrap();
    let descending: Vec<String> =
        serde_json::from_value(browser.eval(VISIBLE_NAMES).unwrap()).unwrap();
    assert_eq!(
        descending,
        ascending.iter().rev().cloned().collect::<Vec<_>>()
    );
    // By CPU, most first (numbers, not text).
    browser
        .eval("document.querySelector('th[data-key=cpu] button').click()")
        .unwrap();
    let cpus: Vec<f64> = serde_json::from_value(
        browser
            .eval("[...document.querySelectorAll('#workloads tbody tr')].map(r => Number(r.cells[4].dataset.v))")
            .unwrap(),
    )
    .unwrap();
    assert!(cpus.windows(2).all(|w| w[0] >= w[1]), "{cpus:?}");

    // Filtering: text typed into the filter, then a verdict.
    browser
        .eval("document.getElementById('q').focus()")
        .unwrap();
    browser.type_text("legacy").unwrap();
    let batch_rows = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.to_string().contains("legacy/batch"))
        .count();
    let shown: Vec<String> = serde_json::from_value(browser.eval(VISIBLE_NAMES).unwrap()).unwrap();
    assert_eq!(shown.len(), batch_rows, "{shown:?}");
    assert_eq!(
        browser
            .eval("document.getElementById('shown').value")
            .unwrap(),
        format!("{batch_rows} of {} workloads shown", json_names.len())
    );
    browser
        .eval("(() => { const q = document.getElementById('q'); q.value = ''; q.dispatchEvent(new Event('input')); const s = document.querySelector('select[name=arm64]'); s.value = 'blocked'; s.dispatchEvent(new Event('change')); return true })()")
        .unwrap();
    let blocked = report["summary"]["arm64"]["workloads"]["blocked"]
        .as_u64()
        .unwrap();
    let shown: Vec<String> = serde_json::from_value(browser.eval(VISIBLE_NAMES).unwrap()).unwrap();
    assert_eq!(u64::try_from(shown.len()).unwrap(), blocked);
    // The state is in the address: opened again, the page shows the same rows.
    let hash = browser.eval("location.hash").unwrap();
    assert_eq!(hash, "#arm64=blocked&sort=-cpu");
    browser.open("about:blank").unwrap();
    browser.open(&format!("{url}#q=team-1&sort=name")).unwrap();
    let shown: Vec<String> = serde_json::from_value(browser.eval(VISIBLE_NAMES).unwrap()).unwrap();
    let team_1 = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["namespace"] == "team-1")
        .count();
    assert_eq!(shown.len(), team_1);
    let mut in_order = shown.clone();
    in_order.sort();
    assert_eq!(shown, in_order);

    // The upgrade path is on the page, beside the image that blocks.
    let text = browser.eval("document.body.innerText").unwrap();
    let text = text.as_str().unwrap();
    assert!(
        text.contains("1.2.0"),
        "the first version that runs on arm64"
    );
    assert!(text.contains("What blocks arm64"));

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html/report.png");
    browser.open(&url).unwrap();
    browser.screenshot(&shot).unwrap();
    eprintln!("screenshot: {}", shot.display());

    // Printed: no controls, and the rows a filter hid are printed too.
    browser.print_media().unwrap();
    assert_eq!(
        browser
            .eval("getComputedStyle(document.getElementById('controls')).display")
            .unwrap(),
        "none"
    );
    browser
        .eval("(() => { document.getElementById('q').value = 'legacy'; document.getElementById('q').dispatchEvent(new Event('input')); return true })()")
        .unwrap();
    let printed = browser
        .eval("[...document.querySelectorAll('#workloads tbody tr')].filter(r => getComputedStyle(r).display !== 'none').length")
        .unwrap();
    assert_eq!(printed, json_names.len());
    drop(browser);

    // Without script: every row is there, the controls are not.
    let Some(mut plain) = self::browser() else {
        return;
    };
    plain.disable_script().unwrap();
    plain.open(&url).unwrap();
    let dom = plain.html().unwrap();
    assert!(
        dom.contains("<form id=\"controls\" class=\"controls\" role=\"search\" hidden=\"\">"),
        "the controls stay hidden"
    );
    let body = dom.split("<tbody>").last().unwrap();
    assert_eq!(body.matches("<tr>").count(), json_names.len());
}
