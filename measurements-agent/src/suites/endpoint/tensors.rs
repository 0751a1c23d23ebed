//! A V2 inference request's tensors as the Open Inference Protocol's raw bytes: for gRPC's
//! `raw_input_contents` and for the REST binary tensor data extension, whose body is a JSON
//! header naming each input's `binary_data_size` followed by the tensors' bytes in order
//! (`Inference-Header-Content-Length` gives the header's length).

use anyhow::{Context, bail};
use bytes::Bytes;
use serde_json::{Value, json};

/// One input: its name, datatype, shape and elements as little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTensor {
    pub name: String,
    pub datatype: String,
    pub shape: Vec<i64>,
    pub raw: Bytes,
}

/// The inputs of a V2 inference request in its JSON form (`{"inputs": [{name, shape, datatype,
/// data}]}`, as [`super::protocol::v2_request`] builds it or `--input FILE` gives it), each
/// checked against its shape and datatype; an error names the input.
pub fn raw_tensors(v2: &Value) -> anyhow::Result<Vec<RawTensor>> {
    let inputs = v2.get("inputs").and_then(Value::as_array).context("the V2 request has no \"inputs\" list")?;
    let mut tensors = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let field = |key: &str| input.get(key).with_context(|| format!("input {i} has no \"{key}\""));
        let name = field("name")?.as_str().with_context(|| format!("input {i}'s name is not text"))?;
        // Names and datatypes may come from the target's metadata: shown cleaned and short.
        let shown = crate::upload::printable_within(name, 100);
        let datatype = field("datatype")?.as_str().with_context(|| format!("input '{shown}': datatype is not text"))?;
        let shape: Vec<i64> = field("shape")?
            .as_array()
            .and_then(|dims| dims.iter().map(|d| d.as_i64().filter(|d| *d >= 0)).collect())
            .with_context(|| format!("input '{shown}': shape is not a list of sizes"))?;
        let mut elements = Vec::new();
        flatten(field("data")?, &mut elements);
        let count = shape.iter().try_fold(1i64, |n, d| n.checked_mul(*d));
        anyhow::ensure!(
            count == Some(elements.len() as i64),
            "input '{shown}': shape {shape:?} holds {} elements, data has {}",
            count.map_or("too many".into(), |c| c.to_string()),
            elements.len()
        );
        let raw = raw_contents(datatype, &elements)
            .with_context(|| format!("input '{shown}' ({})", crate::upload::printable_within(datatype, 20)))?;
        tensors.push(RawTensor { name: name.to_string(), datatype: datatype.to_string(), shape, raw });
    }
    anyhow::ensure!(!tensors.is_empty(), "the V2 request's \"inputs\" list is empty");
    Ok(tensors)
}

/// The request as the REST binary tensor data extension frames it: the body, and the length of
/// its JSON header. Every input's data goes as raw bytes after the header; the request's own
/// `id`, `parameters` and `outputs` and each input's `parameters` are kept, and outputs are
/// asked for in binary too (`binary_data_output`, unless the request says otherwise), as
/// Triton's clients ask.
pub fn binary_body(v2: &Value) -> anyhow::Result<(Bytes, usize)> {
    let tensors = raw_tensors(v2)?;
    let given = v2.get("inputs").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let inputs: Vec<Value> = tensors
        .iter()
        .zip(given)
        .map(|(t, input)| {
            // The input's own parameters (a content_type, say) are kept beside the size.
            let mut parameters = input.get("parameters").filter(|p| p.is_object()).cloned().unwrap_or(json!({}));
            parameters["binary_data_size"] = json!(t.raw.len());
            json!({"name": t.name, "shape": t.shape, "datatype": t.datatype, "parameters": parameters})
        })
        .collect();
    let mut header = json!({ "inputs": inputs });
    for key in ["id", "outputs"] {
        if let Some(value) = v2.get(key) {
            header[key] = value.clone();
        }
    }
    let mut parameters = v2.get("parameters").filter(|p| p.is_object()).cloned().unwrap_or_else(|| json!({}));
    if parameters.get("binary_data_output").is_none() {
        parameters["binary_data_output"] = json!(true);
    }
    header["parameters"] = parameters;
    let header = header.to_string().into_bytes();
    let json_length = header.len();
    let mut body = header;
    for tensor in &tensors {
        body.extend_from_slice(&tensor.raw);
    }
    Ok((Bytes::from(body), json_length))
}

/// V2 JSON allows `data` flat or nested row-major; the elements in order.
fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| flatten(item, out)),
        other => out.push(other),
    }
}

/// Elements as the protocol's raw bytes: little-endian at the datatype's width; BOOL one byte;
/// BYTES a 4-byte length and then the bytes.
fn raw_contents(datatype: &str, elements: &[&Value]) -> anyhow::Result<Bytes> {
    let mut out = Vec::new();
    for (i, element) in elements.iter().enumerate() {
        let bad = || anyhow::anyhow!("element {i} ({element}) is not a {datatype} value");
        let int = || element.as_i64().ok_or_else(bad);
        let uint = || element.as_u64().ok_or_else(bad);
        let float = || element.as_f64().ok_or_else(bad);
        let fits = |v: i64, lo: i64, hi: i64| if (lo..=hi).contains(&v) { Ok(v) } else { Err(bad()) };
        match datatype {
            "BOOL" => {
                out.push(u8::from(element.as_bool().or_else(|| element.as_u64().map(|v| v != 0)).ok_or_else(bad)?))
            }
            "INT8" => out.extend((fits(int()?, i8::MIN.into(), i8::MAX.into())? as i8).to_le_bytes()),
            "INT16" => out.extend((fits(int()?, i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes()),
            "INT32" => out.extend((fits(int()?, i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes()),
            "INT64" => out.extend(int()?.to_le_bytes()),
            "UINT8" => out.extend(u8::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT16" => out.extend(u16::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT32" => out.extend(u32::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT64" => out.extend(uint()?.to_le_bytes()),
            "FP16" => out.extend(half::f16::from_f64(float()?).to_le_bytes()),
            "BF16" => out.extend(half::bf16::from_f64(float()?).to_le_bytes()),
            "FP32" => out.extend((float()? as f32).to_le_bytes()),
            "FP64" => out.extend(float()?.to_le_bytes()),
            "BYTES" => {
                let text = element.as_str().ok_or_else(bad)?.as_bytes();
                out.extend(u32::try_from(text.len()).map_err(|_| bad())?.to_le_bytes());
                out.extend_from_slice(text);
            }
            _ => bail!("that datatype is not one the Open Inference Protocol defines"),
        }
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_json_becomes_raw_little_endian_tensors() {
        let v2 = json!({"inputs": [
            {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [[1.5, -2.0]]},
            {"name": "t", "shape": [2], "datatype": "BYTES", "data": ["hi", ""]},
            {"name": "b", "shape": [3], "datatype": "BOOL", "data": [true, false, 1]},
            {"name": "h", "shape": [1], "datatype": "FP16", "data": [1.0]},
        ]});
        let tensors = raw_tensors(&v2).unwrap();
        assert_eq!(tensors[0].shape, vec![1, 2]);
        let floats: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        assert_eq!(tensors[0].raw.as_ref(), floats.as_slice());
        assert_eq!(tensors[1].raw.as_ref(), b"\x02\0\0\0hi\0\0\0\0");
        assert_eq!(tensors[2].raw.as_ref(), [1, 0, 1]);
        assert_eq!(tensors[3].raw.as_ref(), [0x00, 0x3c], "1.0 in IEEE half precision");
    }

    #[test]
    fn requests_that_cannot_be_encoded_name_the_input() {
        let err = |v2: Value| format!("{:#}", raw_tensors(&v2).unwrap_err());
        let one = |datatype: &str, data: Value| json!({"inputs": [{"name": "x", "shape": [1], "datatype": datatype, "data": data}]});
        assert!(err(one("INT8", json!([300]))).contains("input 'x' (INT8)"));
        assert!(err(one("FP32", json!(["a"]))).contains("input 'x' (FP32)"));
        assert!(err(one("FP32", json!(["a"]))).contains("element 0"));
        assert!(err(one("COMPLEX", json!([1]))).contains("input 'x'"));
        let wrong_count = json!({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1.0]}]});
        assert!(err(wrong_count).contains("holds 4 elements, data has 1"));
        assert!(err(json!({"inputs": []})).contains("empty"));
        assert!(err(json!({})).contains("\"inputs\""));
    }

    #[test]
    fn a_binary_body_is_a_json_header_then_each_tensor_in_order() {
        let v2 = json!({"id": "r1", "outputs": [{"name": "predict"}], "inputs": [
            {"name": "a", "shape": [2], "datatype": "INT16", "data": [1, -1], "parameters": {"content_type": "np"}},
            {"name": "b", "shape": [1, 1], "datatype": "FP64", "data": [[0.5]]},
        ]});
        let (body, json_length) = binary_body(&v2).unwrap();
        let header: Value = serde_json::from_slice(&body[..json_length]).unwrap();
        assert_eq!(header["id"], "r1");
        assert_eq!(header["outputs"][0]["name"], "predict");
        assert_eq!(header["parameters"]["binary_data_output"], true);
        assert_eq!(header["inputs"][0]["parameters"]["binary_data_size"], 4);
        assert_eq!(header["inputs"][0]["parameters"]["content_type"], "np", "the input's own parameters stay");
        assert_eq!(header["inputs"][1]["parameters"]["binary_data_size"], 8);
        assert_eq!(header["inputs"][1]["shape"], json!([1, 1]));
        assert!(header["inputs"][0].get("data").is_none(), "the data goes after the header, not in it");
        let mut tail = vec![1, 0, 0xff, 0xff];
        tail.extend(0.5f64.to_le_bytes());
        assert_eq!(&body[json_length..], tail.as_slice());
    }
}
