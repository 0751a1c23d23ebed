//! Latency histograms as agents upload them: HdrHistogram's V2 compressed encoding in base64,
//! the form HdrHistogram log files use. Decoding is bounded before the library sees a byte: the
//! encoding's own length fields and precision would otherwise let a few hundred hostile bytes
//! ask for gigabytes.

use std::io::Read;

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use model::RunUpload;
use model::wire::validate::FieldError;

/// The cookies of the encoding, with the word size of counts (8 bytes: 0x10) in their low bits.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Inflated size limit: ample for 1 ns..1000 s at 3 significant digits (about 30,000 counts).
const MAX_INFLATED: usize = 1 << 20;
/// Most significant digits accepted (the counts array grows tenfold with each).
const MAX_DIGITS: u32 = 3;
/// Highest trackable value accepted, in nanoseconds (about 18 minutes).
const MAX_HIGHEST: u64 = 1 << 40;
/// The encoded histograms of one run together, in base64 characters.
const MAX_RUN_HISTOGRAM_BYTES: usize = 4 << 20;
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
    if bytes.len() < 8 || word(&bytes, 4).map(|n| n as usize) != Some(bytes.len() - 8) {
        return Err("compressed length does not match the data".into());
    }
    // The header first: it bounds what the rest may inflate to.
    let mut inflater = flate2::read::ZlibDecoder::new(&bytes[8..]);
    let mut inflated = vec![0u8; HEADER];
    inflater.read_exact(&mut inflated).map_err(|_| "not an HdrHistogram V2 encoding inside".to_string())?;
    if word(&inflated, 0) != Some(V2_COOKIE) {
        return Err("not an HdrHistogram V2 encoding inside".into());
    }
    let digits = word(&inflated, 12).unwrap_or(u32::MAX);
    if digits > MAX_DIGITS {
        return Err(format!("more than {MAX_DIGITS} significant digits"));
    }
    let (lowest, highest) = (long(&inflated, 16).unwrap_or(0), long(&inflated, 24).unwrap_or(u64::MAX));
    if highest > MAX_HIGHEST || lowest == 0 || highest < lowest.saturating_mul(2) {
        return Err(format!("trackable range must be within 1 to {MAX_HIGHEST} ns"));
    }
    // Each count takes at most 9 bytes, so a longer payload is not a histogram of this range.
    let payload = word(&inflated, 4).unwrap_or(u32::MAX) as usize;
    let most = 9 * counts_len(lowest, highest, digits);
    if payload > most.min(MAX_INFLATED) {
        return Err(format!("payload of {payload} bytes is longer than {most} for this range"));
    }
    inflater.take(payload as u64 + 1).read_to_end(&mut inflated).map_err(|e| format!("does not inflate: {e}"))?;
    if inflated.len() != HEADER + payload {
        return Err("payload length does not match the data".into());
    }
    Deserializer::new().deserialize(&mut &inflated[..]).map_err(|e| format!("does not decode: {e:?}"))
}

/// How many counts a histogram of this range and precision holds (HdrHistogram's layout).
fn counts_len(lowest: u64, highest: u64, digits: u32) -> usize {
    let largest_single_unit = 2 * 10u64.pow(digits);
    let magnitude = (largest_single_unit as f64).log2().ceil() as u32;
    let sub_bucket_count = 1u64 << magnitude.max(1);
    let unit_magnitude = 63 - lowest.leading_zeros();
    let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
    let mut buckets = 1;
    while smallest_untrackable <= highest && smallest_untrackable <= u64::MAX / 2 {
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    ((buckets + 1) * (sub_bucket_count / 2)) as usize
}

/// Every histogram of `run` decodes and holds exactly as many samples as its statistics say.
pub fn check(run: &RunUpload) -> Result<(), FieldError> {
    let texts: usize = run.measurements.iter().filter_map(|m| m.histogram.as_ref()).map(String::len).sum();
    if texts > MAX_RUN_HISTOGRAM_BYTES {
        return Err(FieldError::new("measurements", format!("histograms over {MAX_RUN_HISTOGRAM_BYTES} bytes in all")));
    }
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
        assert!(decode(&encode(&too_high)).unwrap_err().contains("trackable range"));
        assert!(decode("SElTVEZBQUFB").unwrap_err().contains("V2 compressed"));
        assert!(decode("!!").unwrap_err().contains("base64"));
        // A valid header that claims a 4 GiB payload inside.
        let mut inner = Vec::new();
        inner.extend_from_slice(&V2_COOKIE.to_be_bytes());
        inner.extend_from_slice(&u32::MAX.to_be_bytes());
        inner.extend_from_slice(&0u32.to_be_bytes());
        inner.extend_from_slice(&3u32.to_be_bytes());
        inner.extend_from_slice(&1u64.to_be_bytes());
        inner.extend_from_slice(&(1u64 << 30).to_be_bytes());
        inner.extend_from_slice(&1f64.to_be_bytes());
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &inner).unwrap();
        let z = z.finish().unwrap();
        let mut outer = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        outer.extend_from_slice(&(z.len() as u32).to_be_bytes());
        outer.extend_from_slice(&z);
        let text = base64::engine::general_purpose::STANDARD.encode(outer);
        assert!(decode(&text).unwrap_err().contains("is longer than"), "{}", decode(&text).unwrap_err());
        // A megabyte of zeros behind a valid header (a 1000:1 zip bomb): refused by length.
        let mut inner = Vec::new();
        inner.extend_from_slice(&V2_COOKIE.to_be_bytes());
        inner.extend_from_slice(&(1u32 << 20).to_be_bytes());
        inner.extend_from_slice(&0u32.to_be_bytes());
        inner.extend_from_slice(&3u32.to_be_bytes());
        inner.extend_from_slice(&1u64.to_be_bytes());
        inner.extend_from_slice(&(1u64 << 40).to_be_bytes());
        inner.extend_from_slice(&1f64.to_be_bytes());
        inner.resize(40 + (1 << 20), 0);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut z, &inner).unwrap();
        let z = z.finish().unwrap();
        assert!(z.len() < 4096, "the bomb is small: {}", z.len());
        let mut outer = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        outer.extend_from_slice(&(z.len() as u32).to_be_bytes());
        outer.extend_from_slice(&z);
        let text = base64::engine::general_purpose::STANDARD.encode(outer);
        assert!(decode(&text).unwrap_err().contains("is longer than"));
        assert!(decode("HISTFA").is_err() && decode("HISTFAAA").is_err(), "short inputs are refused, not underflowed");
    }

    #[test]
    fn counts_len_is_the_librarys() {
        for (lowest, highest, digits) in
            [(1, 1_000_000_000_000, 3), (1, 1 << 40, 2), (1000, 1 << 30, 3), (1, 1 << 20, 1)]
        {
            let h = Histogram::<u64>::new_with_bounds(lowest, highest, digits as u8).unwrap();
            assert_eq!(counts_len(lowest, highest, digits), h.distinct_values(), "{lowest} {highest} {digits}");
        }
    }
}
