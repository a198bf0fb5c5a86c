"""If, Loop and Scan through `inferd run`, on models built with onnx.helper and checked against
numpy: values captured from enclosing graphs (two levels deep), early exit, zero iterations, and
Scan's axes and directions."""
import subprocess

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from inferd_harness import inferd_binary

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def run(model, tmp_path, **inputs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    args = [inferd_binary(), "run", str(path), "--output-dir", str(tmp_path / "out"), "--iterations", "1", "--warmup", "0"]
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return lambda name: np.load(tmp_path / "out" / f"{name}.npy")


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def test_loop_body_if_reads_values_of_both_enclosing_graphs(tmp_path):
    # acc += 2x on iterations > 1, acc -= x otherwise; `s` (2x) lives in the main graph, `acc` in
    # the loop body: the If branches capture one from each.
    then_branch = helper.make_graph([helper.make_node("Add", ["acc_in", "s"], ["then_out"])], "then", [],
                                    [helper.make_tensor_value_info("then_out", F, [3])])
    else_branch = helper.make_graph([helper.make_node("Sub", ["acc_in", "x"], ["else_out"])], "else", [],
                                    [helper.make_tensor_value_info("else_out", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Greater", ["i", "one"], ["late"]),
         helper.make_node("If", ["late"], ["acc_out"], then_branch=then_branch, else_branch=else_branch),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["trace"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("acc_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("acc_out", F, [3]),
         helper.make_tensor_value_info("trace", F, [3])],
        initializer=[numpy_helper.from_array(np.array(1, np.int64), "one")])
    m = model([helper.make_node("Mul", ["x", "two"], ["s"]),
               helper.make_node("Loop", ["trips", "", "zeros"], ["acc", "traces"], body=body)],
              [helper.make_tensor_value_info("x", F, [3])],
              [helper.make_tensor_value_info("acc", F, [3]), helper.make_tensor_value_info("traces", F, [None, 3])],
              [numpy_helper.from_array(np.array(2, np.float32), "two"), numpy_helper.from_array(np.array(4, np.int64), "trips"),
               numpy_helper.from_array(np.zeros(3, np.float32), "zeros")])
    x = np.array([1, -2, 0.5], np.float32)
    acc, traces = np.zeros(3, np.float32), []
    for i in range(4):
        acc = acc + 2 * x if i > 1 else acc - x
        traces.append(acc)
    out = run(m, tmp_path, x=x)
    np.testing.assert_allclose(out("acc"), acc)
    np.testing.assert_allclose(out("traces"), np.stack(traces))


def loop_until(limit_name, initializers, tmp_path):
    """Loop without a trip count whose body stops once i >= 2, or with trip count `limit_name`."""
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "two"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Add", ["v_in", "i_f"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("v_in", F, [])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_out", F, []),
         helper.make_tensor_value_info("i_f", F, [])],
        initializer=[numpy_helper.from_array(np.array(2, np.int64), "two")])
    m = model([helper.make_node("Loop", [limit_name, "", "v0"], ["v", "is"], body=body)], [],
              [helper.make_tensor_value_info("v", F, []), helper.make_tensor_value_info("is", F, [None])],
              [numpy_helper.from_array(np.array(10, np.float32), "v0"), *initializers])
    return run(m, tmp_path)


def test_loop_stops_on_its_condition_and_runs_zero_times(tmp_path):
    early = loop_until("", [], tmp_path / "early")  # i = 0, 1, 2: the body says stop after i = 2
    assert early("v").item() == 13 and early("is").tolist() == [0, 1, 2]
    never = loop_until("zero", [numpy_helper.from_array(np.array(0, np.int64), "zero")], tmp_path / "never")
    assert never("v").item() == 10 and never("is").shape == (0,)


def test_scan_axes_and_directions(tmp_path):
    # Running sum over a reversed scan input along axis 1, the per-step sums written along axis 1
    # in reverse order, plus a second (forward) scan input multiplied in.
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "a_t"], ["sum_out"]),
         helper.make_node("Mul", ["sum_out", "b_t"], ["step"])],
        "body",
        [helper.make_tensor_value_info("sum_in", F, [2]), helper.make_tensor_value_info("a_t", F, [2]),
         helper.make_tensor_value_info("b_t", F, [2])],
        [helper.make_tensor_value_info("sum_out", F, [2]), helper.make_tensor_value_info("step", F, [2])])
    m = model([helper.make_node("Scan", ["init", "a", "b"], ["total", "steps"], body=body, num_scan_inputs=2,
                                scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                                scan_output_axes=[1], scan_output_directions=[1])],
              [helper.make_tensor_value_info(n, F, None) for n in ("init", "a", "b")],
              [helper.make_tensor_value_info("total", F, None), helper.make_tensor_value_info("steps", F, None)])
    init = np.array([1, 2], np.float32)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)  # scanned along axis 1, last column first
    b = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    total, steps = init.copy(), []
    for t in range(4):
        total = total + a[:, 3 - t]
        steps.append(total * b[t])
    out = run(m, tmp_path, init=init, a=a, b=b)
    np.testing.assert_allclose(out("total"), total)
    np.testing.assert_allclose(out("steps"), np.stack(steps[::-1], axis=1))
