//! Latency histograms as agents upload them: HdrHistogram's V2 compressed encoding in base64,
//! the form HdrHistogram log files use. Decoding is bounded before the library sees a byte: the
//! encoding's own length fields and precision would otherwise let a few hundred hostile bytes
//! ask for gigabytes.

use std::io::Read;

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use model::RunUpload;
use model::validate::FieldError;

/// The cookies of the encoding, with the word size of counts (8 bytes: 0x10) in their low bits.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Inflated size limit: ample for 1 ns..1000 s at 3 significant digits (about 30,000 counts).
const MAX_INFLATED: usize = 1 << 20;
/// Most significant digits accepted (the counts array grows tenfold with each).
const MAX_DIGITS: u32 = 3;
/// Highest trackable value accepted, in nanoseconds (about 18 minutes).
const MAX_HIGHEST: u64 = 1 << 40;
/// The uncompressed header: cookie, payload length, normalising offset, digits, lowest,
/// highest, integer-to-double ratio.
const HEADER: usize = 40;

/// Decodes one histogram; the error says what is wrong with it.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("not base64: {e}"))?;
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().expect("4 bytes")));
    let long = |b: &[u8], at: usize| b.get(at..at + 8).map(|w| u64::from_be_bytes(w.try_into().expect("8 bytes")));
    if word(&bytes, 0) != Some(V2_COMPRESSED_COOKIE) {
        return Err("not an HdrHistogram V2 compressed encoding".into());
    }
    if word(&bytes, 4).map(|n| n as usize) != Some(bytes.len() - 8) {
        return Err("compressed length does not match the data".into());
    }
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[8..])
        .take(MAX_INFLATED as u64 + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| format!("does not inflate: {e}"))?;
    if inflated.len() > MAX_INFLATED {
        return Err(format!("inflates to more than {MAX_INFLATED} bytes"));
    }
    if word(&inflated, 0) != Some(V2_COOKIE) || inflated.len() < HEADER {
        return Err("not an HdrHistogram V2 encoding inside".into());
    }
    if word(&inflated, 4).map(|n| n as usize) != Some(inflated.len() - HEADER) {
        return Err("payload length does not match the data".into());
    }
    if word(&inflated, 12).is_none_or(|digits| digits > MAX_DIGITS) {
        return Err(format!("more than {MAX_DIGITS} significant digits"));
    }
    if long(&inflated, 24).is_none_or(|highest| highest > MAX_HIGHEST) {
        return Err(format!("highest trackable value above {MAX_HIGHEST} ns"));
    }
    Deserializer::new().deserialize(&mut &inflated[..]).map_err(|e| format!("does not decode: {e:?}"))
}

/// Every histogram of `run` decodes and holds exactly as many samples as its statistics say.
pub fn check(run: &RunUpload) -> Result<(), FieldError> {
    for (i, m) in run.measurements.iter().enumerate() {
        let Some(text) = &m.histogram else { continue };
        let field = format!("measurements[{i}].histogram");
        let histogram = decode(text).map_err(|reason| FieldError::new(&field, reason))?;
        let samples = m.stats.map_or(0, |s| s.samples);
        if histogram.len() != samples {
            return Err(FieldError::new(
                field,
                format!("holds {} samples but stats.samples is {samples}", histogram.len()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

    use super::*;

    fn encode(h: &Histogram<u64>) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut bytes).unwrap();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn a_latency_histogram_round_trips() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for v in [1_000u64, 2_000, 2_000, 50_000_000] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert!(encode(&h).len() < 200, "a sparse histogram stays small");
    }

    #[test]
    fn hostile_encodings_are_refused_before_allocation() {
        let too_precise = Histogram::<u64>::new_with_bounds(1, 1000, 5).unwrap();
        assert!(decode(&encode(&too_precise)).unwrap_err().contains("significant digits"));
        let too_high = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 2).unwrap();
        assert!(decode(&encode(&too_high)).unwrap_err().contains("highest trackable"));
        assert!(decode("SElTVEZBQUFB").unwrap_err().contains("V2 compressed"));
        assert!(decode("!!").unwrap_err().contains("base64"));
        // A valid header that claims a 4 GiB payload inside.
        let mut inner = Vec::new();
        inner.extend_from_slice(&V2_COOKIE.to_be_bytes());
        inner.extend_from_slice(&u32::MAX.to_be_bytes());
        inner.extend_from_slice(&[0; 32]);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &inner).unwrap();
        let z = z.finish().unwrap();
        let mut outer = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        outer.extend_from_slice(&(z.len() as u32).to_be_bytes());
        outer.extend_from_slice(&z);
        let text = base64::engine::general_purpose::STANDARD.encode(outer);
        assert!(decode(&text).unwrap_err().contains("payload length"));
    }
}
