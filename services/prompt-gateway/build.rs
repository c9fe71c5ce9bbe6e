//! Rebuilds the crate when a migration changes: `sqlx::migrate!()` embeds them at compile
//! time, and cargo cannot see that on its own.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
