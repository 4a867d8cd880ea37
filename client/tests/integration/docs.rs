//! The Rust quick start of docs/partitions.md is `client/examples/quickstart.rs`, which the build
//! compiles: the page shows the program word for word (without its header comment), so an
//! example that no longer compiles cannot stay on the page.

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

#[test]
fn the_pages_quick_start_is_the_example_the_build_compiles() {
    let page = std::fs::read_to_string(format!("{ROOT}/docs/partitions.md")).unwrap();
    let example = std::fs::read_to_string(format!("{ROOT}/client/examples/quickstart.rs")).unwrap();
    let program: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let after = page
        .split_once("`client/examples/quickstart.rs` (which the build compiles")
        .expect("the page names the example")
        .1;
    let block = after
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .expect("a rust block after it")
        .0;
    assert_eq!(block, program);
}
