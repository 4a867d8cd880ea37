//! The async quick start of docs/partitions.md ("Clients", Rust), as a program the build
//! compiles, so that the page's example keeps compiling: reserve a partitioned filter, add,
//! look up.
//!
//! `cargo run -p rustbloom-client --example quickstart -- redis://127.0.0.1:40705`
//!
//! A project of its own needs, in its Cargo.toml (the crate is not on crates.io: a path or a
//! git dependency):
//!
//! ```toml
//! rustbloom-client = { path = "../rustbloom/client", features = ["async"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use rustbloom_client::{Client, Error, Filter, Growth, ReserveOptions, WriteOptions};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::args().nth(1);
    let url = url.as_deref().unwrap_or("redis://127.0.0.1:6379"); // any node of a cluster
    let mut conn = Client::open_async(url).await?.connect_async().await?;
    let opts = ReserveOptions {
        error_rate: 1e-9,
        capacity: 1_000_000_000,
        growth: Growth::NonScaling,
        partitions: Some(16),
    };
    // Once; a name that is taken is `Error::Server("item exists")`, and nothing is changed.
    let clicks = match Filter::reserve_async(&mut conn, b"clicks", &opts).await {
        Err(Error::Server(text)) if text == "item exists" => {
            // Elsewhere: everything needed is in the descriptor.
            Filter::discover_async(&mut conn, b"clicks")
                .await?
                .ok_or_else(|| Error::Usage("clicks vanished".into()))?
        }
        reserved => reserved?,
    };
    let items = [b"click-1".as_slice(), b"click-2"];
    let new = clicks
        .add_async(&mut conn, &items, &WriteOptions::default())
        .await?;
    let seen = clicks
        .exists_async(&mut conn, &[b"click-1".as_slice(), b"nope"], 1000)
        .await?;
    println!("added {new:?}, found {seen:?}"); // added [true, true], found [true, false]
    Ok(())
}
