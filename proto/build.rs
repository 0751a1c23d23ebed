fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/headroom.proto");
    let descriptors = protox::compile(["headroom.proto"], ["proto"])?;
    tonic_prost_build::configure().codec_path("crate::codec::StrictCodec").compile_fds(descriptors)?;
    Ok(())
}
