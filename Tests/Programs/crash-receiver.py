#!/usr/bin/env python3
"""A crash server for the upload tests: listens on 127.0.0.1 (a free port, printed as
"listening PORT" on standard output), records every request it reads whole into RECORD-DIR, and
answers each as the next mode of --modes says (the last mode repeats).

Each request N (from 1) is recorded as N.json, written whole then renamed: method, path, headers,
content type and encoding, the body's size as sent, the multipart fields (name -> value) and files
(name -> filename, content type, size), each part's header lines, the status and answer given,
and each file's bytes as N.FIELD.bin. Both a Content-Length body and a chunked one (Crashpad's) are read. A request whose
body did not arrive whole is recorded as N.partial.json (with what arrived).

Modes:
  ok        200, "bp-ok-N" (a Breakpad server's bare id)
  socorro   200, "CrashID=bp-UUID" as Socorro's collector answers
  sentry    200, {"id": "HEX"} as Sentry's minidump endpoint answers
  bugsplat  200, {"status": "success", "crash_id": N, "url": ...} as BugSplat's crashpad.php answers
            (docs.bugsplat.com, Crash Post Endpoints, "Crashpad")
  500       500, "internal error"
  429:S     429 with Retry-After: S
  413       413, "payload too large"
  reset     reads half the body, then resets the connection (SO_LINGER 0)
  slow:S    reads the body, waits S seconds, then answers 200 (past a client's timeout)
  hold      reads the headers, creates N.holding, waits until RECORD-DIR/release exists, then
            reads the body and answers 200 (a test kills the uploader meanwhile)
  flaky     500 on odd request numbers, 200 on even ones
"""
import email.parser
import email.policy
import gzip
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import uuid

record_dir = None
modes = ["ok"]
counter = 0
counter_lock = threading.Lock()


def write_whole(path, data):
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.rename(temporary, path)


def parse_multipart(content_type, body):
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields, files, order = {}, {}, []
    if not message.is_multipart():
        return fields, files, order, None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        payload = part.get_payload(decode=True) or b""
        order.append(name)
        if filename is None:
            fields[name] = payload.decode("utf-8", "replace")
        else:
            files[name] = {"filename": filename, "content_type": part.get_content_type(), "size": len(payload),
                           "bytes": payload}
    return fields, files, order, message.get_boundary()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        global counter
        with counter_lock:
            counter += 1
            number = counter
        mode = modes[min(number - 1, len(modes) - 1)]
        length = int(self.headers.get("Content-Length", "0"))
        if mode == "hold":
            open(os.path.join(record_dir, "%d.holding" % number), "w").close()
            while not os.path.exists(os.path.join(record_dir, "release")):
                time.sleep(0.01)
        if mode == "reset":
            self.rfile.read(max(length // 2, 1))
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        body = b""
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        if chunked:  # Crashpad's handler streams its body in chunks
            complete = False
            while True:
                size_line = self.rfile.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    complete = True
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
            length = len(body) if complete else len(body) + 1
        while len(body) < length and not chunked:
            piece = self.rfile.read(length - len(body))
            if not piece:
                break
            body += piece
        entry = {"number": number, "mode": mode, "method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "content_type": self.headers.get("Content-Type", ""),
                 "content_encoding": self.headers.get("Content-Encoding", ""), "body_size": len(body)}
        if len(body) < length:
            write_whole(os.path.join(record_dir, "%d.partial.json" % number), json.dumps(entry).encode())
            return
        decoded = gzip.decompress(body) if entry["content_encoding"] == "gzip" else body
        fields, files, order, boundary = parse_multipart(entry["content_type"], decoded)
        # Each part's own header lines, as sent.
        entry["part_headers"] = [part.split(b"\r\n\r\n", 1)[0].decode("utf-8", "replace").strip()
                                 for part in decoded.split(b"--" + (boundary or "").encode())[1:-1]]
        entry["fields"] = fields
        entry["part_order"] = order
        entry["boundary"] = boundary
        entry["files"] = {k: {x: y for x, y in v.items() if x != "bytes"} for k, v in files.items()}
        status, headers, answer = 200, {}, ("bp-ok-%d" % number).encode()
        if mode == "socorro":
            answer = ("CrashID=bp-%s\n" % uuid.uuid4()).encode()
        elif mode == "sentry":
            answer = json.dumps({"id": uuid.uuid4().hex}).encode()
            headers["Content-Type"] = "application/json"
        elif mode == "bugsplat":
            answer = json.dumps({"status": "success", "crash_id": 1000 + number,
                                 "url": "https://app.bugsplat.com/browse/crashInfo.php?id=%d" % (1000 + number)}).encode()
            headers["Content-Type"] = "application/json"
        elif mode == "500" or (mode == "flaky" and number % 2 == 1):
            status, answer = 500, b"internal error"
        elif mode.startswith("429:"):
            status, answer = 429, b"slow down"
            headers["Retry-After"] = mode.split(":")[1]
        elif mode == "413":
            status, answer = 413, b"payload too large"
        entry["status"] = status
        entry["answer"] = answer.decode()
        for name, info in files.items():
            write_whole(os.path.join(record_dir, "%d.%s.bin" % (number, name)), info["bytes"])
        write_whole(os.path.join(record_dir, "%d.json" % number), json.dumps(entry).encode())
        if mode.startswith("slow:"):
            time.sleep(float(mode.split(":")[1]))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    global record_dir, modes
    arguments = sys.argv[1:]
    if len(arguments) < 1:
        sys.exit("usage: crash-receiver.py RECORD-DIR [--modes MODE,MODE...]")
    record_dir = arguments[0]
    if "--modes" in arguments:
        modes = arguments[arguments.index("--modes") + 1].split(",")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, address: None  # a reset or killed client is part of the test
    print("listening %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
