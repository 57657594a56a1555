//! Layers are read over connections of their own (bounded read buffers, HTTP/1.1): over TLS
//! against the real registry, whose TLS offers HTTP/2 too.

use noe_core::binary::Verdict;
use noe_test_support::LayerEntry as E;
use serde_json::json;

use super::bounds::noise;
use super::support::{elf, image, Setup};

#[tokio::test]
async fn a_layer_is_read_whole_over_tls() {
    let setup = Setup::tls().await;
    // The program after 3 MiB of noise: the layer is read to its end, over many reads.
    let layers = [vec![
        E::data("usr/share/noise", &noise(3 << 20)),
        E::program("app", elf("arm64")),
    ]];
    let app = image("linux/arm64", &["/app"], json!({}), &layers);
    let reference = setup.push("tls/app", "1", &app).await;
    let report = setup.verify_one(&reference).await;
    assert_eq!(report.report.verdict, Verdict::Verified, "{report:?}");
    let layer = app.layers[0].bytes.len() as u64;
    assert_eq!(report.bytes, layer, "the layer read once, whole");
    assert_eq!(setup.blob_gets().len(), 2, "the config and the layer");
}
