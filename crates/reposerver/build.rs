//! Generates the repo-server messages and client from `proto/repository.proto` with
//! protox (a proto compiler written in Rust), so that building needs nothing but cargo.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/repository.proto";
    println!("cargo:rerun-if-changed={proto}");
    let files = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        // Maps in key order: the request's bytes do not depend on a hash seed (Argo CD's
        // Go marshaller writes maps sorted, too).
        .btree_map(".")
        // Messages carrying credentials get a hand-written Debug that never shows them.
        .skip_debug([".repository.Repository", ".repository.RepoCreds"])
        .compile_fds(files)?;
    Ok(())
}
