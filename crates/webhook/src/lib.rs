//! Webhook.
