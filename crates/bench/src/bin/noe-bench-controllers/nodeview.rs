//! What the admission path pays to read the node store: `NodeView::archs()` and
//! `NodeView::node(name)` over N nodes, nanoseconds per call (single thread, bounded loop).

use std::hint::black_box;
use std::time::Instant;

use noe_controller::objects::NodeRecord;
use noe_controller::NodeView;

use noe_bench::cluster::node_name;

/// `nodeview` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Nodes in the view.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Calls per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub iterations: usize,
}

pub fn run(options: &Options) {
    let records = (0..options.nodes)
        .map(|i| {
            let arch = if i % 2 == 0 { "amd64" } else { "arm64" };
            NodeRecord::new(&node_name(i), Some(arch), Some("linux"), Vec::new())
        })
        .collect();
    let view = NodeView::from_records(records);
    let names: Vec<String> = (0..options.nodes.max(1)).map(node_name).collect();
    let iterations = options.iterations.max(1);
    let started = Instant::now();
    for _ in 0..iterations {
        black_box(view.archs());
    }
    let archs = started.elapsed().as_nanos() as f64 / iterations as f64;
    let started = Instant::now();
    for i in 0..iterations {
        black_box(view.node(&names[i % names.len()]));
    }
    let node = started.elapsed().as_nanos() as f64 / iterations as f64;
    println!("## Controllers: NodeView reads");
    println!();
    println!(
        "{} nodes, {iterations} calls each, one thread.",
        options.nodes
    );
    println!();
    println!("| call | ns per call |");
    println!("|---|---:|");
    println!("| `archs()` | {archs:.1} |");
    println!("| `node(name)` | {node:.1} |");
    println!();
}
