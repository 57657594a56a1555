//! Marks the tests that replay the registry's upstream tables (`../shared/conformance/registry`)
//! as ignored when that data is absent (`crates/build/conformance.rs`).

include!("../build/conformance.rs");

fn main() {
    conformance("registry");
}
