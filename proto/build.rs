fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/headroom.proto");
    println!("cargo:rerun-if-changed=proto/transport.proto");
    println!("cargo:rerun-if-changed=proto/inference.proto");
    let descriptors = protox::compile(["headroom.proto"], ["proto"])?;
    tonic_prost_build::configure().codec_path("crate::codec::StrictCodec").compile_fds(descriptors)?;
    // The transport benchmark's messages: `bytes` fields as `Bytes`, so decoding does not copy.
    let descriptors = protox::compile(["transport.proto"], ["proto"])?;
    tonic_prost_build::configure().bytes(".headroom.transport.v1").compile_fds(descriptors)?;
    // The Open Inference Protocol, for the endpoint suite's client: no server here.
    let descriptors = protox::compile(["inference.proto"], ["proto"])?;
    tonic_prost_build::configure().build_server(false).bytes(".inference").compile_fds(descriptors)?;
    Ok(())
}
