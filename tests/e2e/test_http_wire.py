"""HTTP/1.1 details that real clients rely on, checked on a raw socket."""
import json
import socket


def raw_exchange(server, payload, read_until_closed=False, expect_responses=1, timeout=5):
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=timeout) as conn:
        conn.sendall(payload)
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
            if not read_until_closed and data.count(b"HTTP/1.1 ") >= expect_responses and data.endswith(b"}"):
                break
        return data


def infer_request(value, extra_headers=""):
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [value]}]})
    return (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}{extra_headers}\r\n\r\n{body}").encode()


def test_pipelined_requests_are_answered_in_order(server):
    data = raw_exchange(server, infer_request(1.0) + infer_request(2.0) + infer_request(3.0), expect_responses=3)
    bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in data.split(b"HTTP/1.1 ")[1:]]
    assert [b["outputs"][0]["data"] for b in bodies] == [[1.0], [2.0], [3.0]]


def test_http10_and_connection_close_end_the_connection(server):
    request = infer_request(4.0).replace(b"HTTP/1.1", b"HTTP/1.0")
    data = raw_exchange(server, request, read_until_closed=True)
    assert data.startswith(b"HTTP/1.0 200") and b'"data":[4.0]' in data
    data = raw_exchange(server, infer_request(5.0, "\r\nConnection: close"), read_until_closed=True)
    assert data.startswith(b"HTTP/1.1 200") and b'"data":[5.0]' in data


def test_expect_100_continue(server):
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [6]}]}).encode()
    head = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            f"Expect: 100-continue\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as conn:
        conn.sendall(head)
        interim = conn.recv(1024)
        assert interim.startswith(b"HTTP/1.1 100"), interim
        conn.sendall(body)
        answer = b""
        while not answer.endswith(b"}"):
            answer += conn.recv(65536)
        assert b"HTTP/1.1 200" in answer and b'"data":[6.0]' in answer


def test_oversized_upload_with_expect_gets_413_without_sending_the_body(server):
    head = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n"
            b"Expect: 100-continue\r\n\r\n")
    data = raw_exchange(server, head, read_until_closed=True)
    assert data.startswith(b"HTTP/1.1 413")
