//! Image selection's nodes ([`noe_webhook::select::NodeSource`]) answered by the node
//! reflector (`--watch-nodes`), from memory.

use noe_controller::NodeView;
use noe_core::compat::NodeFacts;
use noe_webhook::select::NodeSource;

/// The reflector's nodes, as image selection evaluates them.
pub struct NodeViewNodes(pub NodeView);

impl NodeSource for NodeViewNodes {
    fn nodes(&self) -> Option<Vec<NodeFacts>> {
        if !self.0.is_ready() {
            return None;
        }
        Some(
            self.0
                .nodes()
                .iter()
                .map(|node| NodeFacts {
                    name: node.name().to_owned(),
                    labels: node.labels.clone(),
                    features: None,
                    schedulable: node.ready && !node.unschedulable,
                })
                .collect(),
        )
    }
}
