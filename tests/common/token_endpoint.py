"""An OAuth 2 token endpoint for tests: the client credentials grant (RFC 6749 4.4) over
HTTPS, handing out unsigned JWTs ({"alg":"none"}) that Kafka's unsecured OAUTHBEARER
validator accepts. Prints its port, then one line per token it issues.

    python3 token_endpoint.py CERT_PEM CLIENT_ID CLIENT_SECRET SCOPE LIFETIME_SECONDS
"""

import base64
import http.server
import json
import ssl
import sys
import time
import urllib.parse

cert, client_id, client_secret, scope, lifetime = sys.argv[1:6]
lifetime = int(lifetime)


def b64(data):
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        expected = "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            return self.answer(401, {"error": "invalid_client"})
        if form.get("grant_type") != ["client_credentials"] or form.get("scope") != [scope]:
            return self.answer(400, {"error": "invalid_request"})
        now = int(time.time())
        claims = {"sub": client_id, "iat": now, "exp": now + lifetime, "scope": scope}
        token = b64({"alg": "none"}) + "." + b64(claims) + "."
        print("issued", flush=True)
        self.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
