// The migrations are embedded by `sqlx::migrate!`; rebuild when one is added or changed.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
