"""ONNX Runtime on the quant suite's GEMM shapes: the anchor its own kernels are measured beside.

Reads {"shapes": [[batch, hidden], ...], "budget_s": seconds} on stdin and prints one JSON
object: ONNX Runtime's version and, per shape and precision, the median seconds per call on
one thread. The models are built here with the `onnx` package (no download):
  fp32: MatMul(X float[b, k], W float[k, n])
  int8: MatMulInteger(X [b, k], W int8[k, n]) with X as uint8 (zero point 128, what dynamic
        quantization emits) and as int8; the faster counts, and the result says which.
A call's fixed cost (Python, binding, session) is measured on a one-element Add and given
beside each figure, so the caller can take it off.
"""

import json
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def session(graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def matmul(b, k, n, rng):
    w = rng.uniform(-1, 1, size=(k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])],
        "fp32",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [b, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [b, n])],
        [numpy_helper.from_array(w, "W")],
    )
    return session(graph), rng.uniform(-1, 1, size=(b, k)).astype(np.float32)


def matmul_integer(b, k, n, rng, unsigned):
    w = rng.integers(-127, 128, size=(k, n), dtype=np.int8)
    if unsigned:
        x = rng.integers(0, 256, size=(b, k), dtype=np.uint8)
        zero = numpy_helper.from_array(np.array(128, dtype=np.uint8), "XZ")
        kind = TensorProto.UINT8
    else:
        x = rng.integers(-127, 128, size=(b, k), dtype=np.int8)
        zero = numpy_helper.from_array(np.array(0, dtype=np.int8), "XZ")
        kind = TensorProto.INT8
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["X", "W", "XZ"], ["Y"])],
        "int8",
        [helper.make_tensor_value_info("X", kind, [b, k])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, [b, n])],
        [numpy_helper.from_array(w, "W"), zero],
    )
    return session(graph), x


def add_one():
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "C"], ["Y"])],
        "call",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(np.ones((1, 1), dtype=np.float32), "C")],
    )
    return session(graph), np.ones((1, 1), dtype=np.float32)


def seconds_per_call(sess, x, budget):
    """Median of batch means, each batch about 2 ms of calls, over the budget."""
    binding = sess.io_binding()
    binding.bind_cpu_input("X", x)
    binding.bind_output("Y")
    for _ in range(3):
        sess.run_with_iobinding(binding)
    start = time.perf_counter()
    sess.run_with_iobinding(binding)
    per_batch = max(1, int(2e-3 / max(time.perf_counter() - start, 1e-9)))
    samples = []
    deadline = time.perf_counter() + budget
    while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 200):
        start = time.perf_counter()
        for _ in range(per_batch):
            sess.run_with_iobinding(binding)
        samples.append((time.perf_counter() - start) / per_batch)
    return statistics.median(samples), len(samples)


def main():
    request = json.load(sys.stdin)
    budget = float(request.get("budget_s", 0.3))
    rng = np.random.default_rng(7)
    overhead, _ = seconds_per_call(*add_one(), budget)
    results = []
    for b, hidden in request["shapes"]:
        k = n = int(hidden)
        seconds, samples = seconds_per_call(*matmul(int(b), k, n, rng), budget)
        results.append({"batch": b, "hidden": hidden, "precision": "fp32", "op": "MatMul", "seconds": seconds, "samples": samples})
        best = None
        for unsigned in (True, False):
            try:
                seconds, samples = seconds_per_call(*matmul_integer(int(b), k, n, rng, unsigned), budget)
            except Exception as error:  # a CPU build without the s8s8 kernel refuses it
                print(f"MatMulInteger {'u8' if unsigned else 's8'}s8: {error}", file=sys.stderr)
                continue
            op = "MatMulInteger u8s8" if unsigned else "MatMulInteger s8s8"
            if best is None or seconds < best["seconds"]:
                best = {"batch": b, "hidden": hidden, "precision": "int8", "op": op, "seconds": seconds, "samples": samples}
        if best is not None:
            results.append(best)
    print(json.dumps({
        "version": ort.__version__,
        "onnx": onnx.__version__,
        "call_overhead_s": overhead,
        "results": results,
    }))


if __name__ == "__main__":
    main()
