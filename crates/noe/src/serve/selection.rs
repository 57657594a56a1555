//! Image selection's nodes ([`noe_webhook::selection::NodeSource`]) answered by the node
//! reflector (`--watch-nodes`) and, with `--watch-node-features`, the `NodeFeature` reflector,
//! from memory.

use noe_controller::{NodeFeatureView, NodeView};
use noe_core::selection::NodeFacts;
use noe_webhook::selection::NodeSource;

/// The reflectors' nodes, as image selection evaluates them.
pub struct NodeViewNodes {
    /// The nodes.
    pub view: NodeView,
    /// Their NFD features (`None`: not watched; a node without features has unknown ones).
    pub features: Option<NodeFeatureView>,
}

impl NodeSource for NodeViewNodes {
    fn nodes(&self) -> Option<Vec<NodeFacts>> {
        if !self.view.is_ready() {
            return None;
        }
        let mut nodes: Vec<NodeFacts> = self
            .view
            .nodes()
            .iter()
            .map(|node| NodeFacts {
                name: node.name().to_owned(),
                labels: node.labels.clone(),
                features: self.features.as_ref().and_then(|f| f.features(node.name())),
                schedulable: node.ready && !node.unschedulable,
            })
            .collect();
        // By name: the store's order is not stable, and a pin by name is written in this order.
        nodes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        Some(nodes)
    }
}
