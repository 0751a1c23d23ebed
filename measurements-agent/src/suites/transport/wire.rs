//! The inference call every transport carries: an f32 tensor of `batch × FEATURES` plus a model
//! name and request id in; `batch × CLASSES` logits out. The "model" is a fixed reduction that
//! reads every input value, so each transport's server touches the whole tensor.

use serde::{Deserialize, Serialize};

/// Values per sample: 1 KiB of f32 per sample, so a payload of N KiB is a batch of N.
pub const FEATURES: usize = 256;
/// Logits per sample.
pub const CLASSES: usize = 10;
pub const MODEL: &str = "headroom-bench-mlp";

/// Samples in a request whose tensor is `payload_bytes` long.
pub fn batch_for(payload_bytes: usize) -> usize {
    (payload_bytes / (FEATURES * 4)).max(1)
}

/// A deterministic request tensor: values that are not all equal, so nothing compresses away.
pub fn tensor(batch: usize) -> Vec<f32> {
    (0..batch * FEATURES).map(|i| ((i * 7919) % 1000) as f32 / 997.0 - 0.5).collect()
}

/// The server's work: logit k of a sample is the sum of the sample's features j with
/// j mod CLASSES = k.
pub fn logits_into(tensor: &[f32], batch: usize, out: &mut [f32]) {
    for (row, logits) in tensor.chunks_exact(FEATURES).take(batch).zip(out.chunks_exact_mut(CLASSES)) {
        // Accumulators in registers, a whole group of CLASSES values per step.
        let mut acc = [0f32; CLASSES];
        let mut groups = row.chunks_exact(CLASSES);
        for group in &mut groups {
            for (a, v) in acc.iter_mut().zip(group) {
                *a += v;
            }
        }
        for (a, v) in acc.iter_mut().zip(groups.remainder()) {
            *a += v;
        }
        logits.copy_from_slice(&acc);
    }
}

pub fn logits(tensor: &[f32], batch: usize) -> Vec<f32> {
    let mut out = vec![0.0; batch * CLASSES];
    logits_into(tensor, batch, &mut out);
    out
}

/// HTTP+JSON request body.
#[derive(Debug, Serialize, Deserialize)]
pub struct JsonRequest {
    pub model: String,
    pub request_id: u64,
    pub batch: u32,
    pub features: u32,
    pub values: Vec<f32>,
}

/// HTTP+JSON response body.
#[derive(Debug, Serialize, Deserialize)]
pub struct JsonResponse {
    pub request_id: u64,
    pub batch: u32,
    pub classes: u32,
    pub logits: Vec<f32>,
}

/// The Unix-socket frame: `len: u32 LE` (bytes after this field), `request_id: u64 LE`,
/// `batch: u32 LE`, `width: u32 LE`, then `batch × width` f32 LE. Requests carry the features,
/// responses the logits.
pub const FRAME_HEADER: usize = 4 + 8 + 4 + 4;

pub fn frame_header(request_id: u64, batch: usize, width: usize) -> [u8; FRAME_HEADER] {
    let mut header = [0u8; FRAME_HEADER];
    let len = (FRAME_HEADER - 4 + batch * width * 4) as u32;
    header[0..4].copy_from_slice(&len.to_le_bytes());
    header[4..12].copy_from_slice(&request_id.to_le_bytes());
    header[12..16].copy_from_slice(&(batch as u32).to_le_bytes());
    header[16..20].copy_from_slice(&(width as u32).to_le_bytes());
    header
}

/// `(request_id, batch, width)` of a frame header, checking that the length agrees.
pub fn parse_frame_header(header: &[u8; FRAME_HEADER], max_values: usize) -> std::io::Result<(u64, usize, usize)> {
    let le32 = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes")) as usize;
    let request_id = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
    let (len, batch, width) = (le32(0), le32(12), le32(16));
    let values = batch.checked_mul(width).filter(|&v| v <= max_values);
    match values {
        Some(values) if len == FRAME_HEADER - 4 + values * 4 => Ok((request_id, batch, width)),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad frame: length {len} for {batch} × {width} values"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logits_sum_every_feature_once() {
        let t = tensor(3);
        let l = logits(&t, 3);
        for b in 0..3 {
            let row: f32 = t[b * FEATURES..(b + 1) * FEATURES].iter().sum();
            let got: f32 = l[b * CLASSES..(b + 1) * CLASSES].iter().sum();
            assert!((row - got).abs() < 1e-3, "{row} vs {got}");
        }
    }

    #[test]
    fn frame_header_round_trips_and_rejects_lies() {
        let h = frame_header(42, 8, FEATURES);
        assert_eq!(parse_frame_header(&h, 1 << 20).unwrap(), (42, 8, FEATURES));
        let mut bad = h;
        bad[0] ^= 1;
        assert!(parse_frame_header(&bad, 1 << 20).is_err());
        assert!(parse_frame_header(&h, 100).is_err(), "over the size limit");
    }

    #[test]
    fn payload_sizes_map_to_batches() {
        assert_eq!(batch_for(1024), 1);
        assert_eq!(batch_for(4 * 1024 * 1024), 4096);
        assert_eq!(tensor(batch_for(64 * 1024)).len() * 4, 64 * 1024);
    }
}
