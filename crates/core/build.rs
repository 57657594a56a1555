//! Marks the tests that replay the placement cases (`../shared/conformance/placement`) as ignored
//! when that data is absent (`crates/build/conformance.rs`).

include!("../build/conformance.rs");

fn main() {
    conformance("placement");
}
