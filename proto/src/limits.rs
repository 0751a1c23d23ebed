//! Counts checked on the wire before a message is decoded. Decoding allocates a struct for every
//! element of a repeated field, and an empty element costs two bytes on the wire but about a
//! hundred in memory, so a 16 MiB message of empty elements would cost gigabytes. The walk
//! below reads only tags and lengths; it allocates nothing.

use model::wire::validate::{MAX_GPUS, MAX_MEASUREMENTS, MAX_PARAMETERS};

use crate::pb;

/// Limits a message type places on its repeated fields, checked before decoding.
pub trait WireLimits {
    /// `Err` names the field over its limit. Malformed bytes pass here and fail in decoding.
    fn check(_bytes: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

impl WireLimits for pb::UploadAck {}

impl WireLimits for pb::RunUpload {
    fn check(bytes: &[u8]) -> Result<(), String> {
        let mut measurements = 0usize;
        let mut gpus = 0usize;
        for field in Fields(bytes) {
            let Ok((number, body)) = field else { return Ok(()) };
            match (number, body) {
                // `node` may occur many times; the occurrences merge, so their GPUs add up.
                (5, Some(node)) => {
                    gpus += Fields(node).count_of(9);
                    at_most(gpus, MAX_GPUS, "node.gpus")?;
                }
                (6, Some(measurement)) => {
                    at_most(Fields(measurement).count_of(3), MAX_PARAMETERS, "measurements[].parameters")?;
                    measurements += 1;
                    at_most(measurements, MAX_MEASUREMENTS, "measurements")?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn at_most(count: usize, limit: usize, field: &str) -> Result<(), String> {
    if count > limit { Err(format!("{field}: more than {limit} entries")) } else { Ok(()) }
}

/// The top-level fields of a protobuf message: `(field number, Some(bytes) for a
/// length-delimited field)`, or `Err` at the first malformed byte.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    /// How many times field `number` occurs (stopping at malformed bytes).
    fn count_of(self, number: u64) -> usize {
        self.map_while(Result::ok).filter(|(n, _)| *n == number).count()
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Option<&'a [u8]>), ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            self.0 = &[];
        }
        Some(item)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u64, Option<&'a [u8]>), ()> {
        let key = self.varint()?;
        let number = key >> 3;
        match key & 7 {
            0 => self.varint().map(|_| (number, None)),
            1 => self.skip(8).map(|_| (number, None)),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ())?;
                self.skip(len).map(|body| (number, Some(body)))
            }
            5 => self.skip(4).map(|_| (number, None)),
            _ => Err(()),
        }
    }

    fn varint(&mut self) -> Result<u64, ()> {
        let mut value = 0u64;
        for (i, byte) in self.0.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Ok(value);
            }
        }
        Err(())
    }

    fn skip(&mut self, len: usize) -> Result<&'a [u8], ()> {
        if len > self.0.len() {
            return Err(());
        }
        let (body, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn upload(measurements: usize, parameters: usize, gpus: usize) -> Vec<u8> {
        let measurement = pb::Measurement {
            parameters: (0..parameters).map(|i| (format!("k{i}"), "v".into())).collect(),
            ..Default::default()
        };
        pb::RunUpload {
            run_id: "x".into(),
            node: Some(pb::Node { gpus: vec![pb::Gpu::default(); gpus], ..Default::default() }),
            measurements: vec![measurement; measurements],
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn counts_at_the_limits_pass_and_one_more_fails() {
        assert_eq!(pb::RunUpload::check(&upload(MAX_MEASUREMENTS, MAX_PARAMETERS, MAX_GPUS)), Ok(()));
        let err = pb::RunUpload::check(&upload(MAX_MEASUREMENTS + 1, 0, 0)).unwrap_err();
        assert!(err.starts_with("measurements:"), "{err}");
        let err = pb::RunUpload::check(&upload(1, MAX_PARAMETERS + 1, 0)).unwrap_err();
        assert!(err.starts_with("measurements[].parameters"), "{err}");
        let err = pb::RunUpload::check(&upload(1, 0, MAX_GPUS + 1)).unwrap_err();
        assert!(err.starts_with("node.gpus"), "{err}");
    }

    #[test]
    fn gpus_of_a_node_sent_in_pieces_add_up() {
        // Each piece is within the limit, but prost merges them into one node.
        let piece = pb::RunUpload {
            node: Some(pb::Node { gpus: vec![pb::Gpu::default(); MAX_GPUS], ..Default::default() }),
            ..Default::default()
        }
        .encode_to_vec();
        let two = [&piece[..], &piece[..]].concat();
        assert_eq!(pb::RunUpload::decode(&two[..]).unwrap().node.unwrap().gpus.len(), 2 * MAX_GPUS, "the pieces merge");
        assert_eq!(pb::RunUpload::check(&piece), Ok(()));
        let err = pb::RunUpload::check(&two).unwrap_err();
        assert!(err.starts_with("node.gpus"), "{err}");
    }

    #[test]
    fn malformed_bytes_are_left_to_the_decoder() {
        for bytes in [&[0xff_u8; 11][..], &[0x32, 0x05, 0x00], &[0x0b], &[]] {
            assert_eq!(pb::RunUpload::check(bytes), Ok(()));
        }
    }
}
