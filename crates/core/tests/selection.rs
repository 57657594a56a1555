//! Image selection by compatibility artifacts: golden evaluation tables ported from NFD's and
//! ocifit-k8s's semantics, the label translation, the choice and its patch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod selection {
    mod choose;
    mod helpers;
    mod nfd;
    mod ocifit;
}
