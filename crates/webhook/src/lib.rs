//! Webhook.
pub mod pull_secrets;
