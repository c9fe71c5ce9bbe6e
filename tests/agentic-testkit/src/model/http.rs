//! A minimal HTTP/1.1 client for tests of the stand-in model, so they see exactly the bytes
//! a real client would. It panics on any failure: it is meant for tests only.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::net::TcpStream;

/// What the server answered.
pub struct HttpAnswer {
    pub status: u16,
    /// The status line and headers, lowercased.
    pub head: String,
    /// The body, de-chunked.
    pub body: String,
}

impl HttpAnswer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the body is JSON")
    }

    /// The `data:` payloads of a server-sent event stream, `[DONE]` included.
    pub fn events(&self) -> Vec<String> {
        self.body
            .split("\n\n")
            .filter(|event| !event.is_empty())
            .map(|event| {
                event
                    .strip_prefix("data: ")
                    .expect("a data event")
                    .to_owned()
            })
            .collect()
    }

    pub fn chunks(&self) -> Vec<Value> {
        let events = self.events();
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        events[..events.len() - 1]
            .iter()
            .map(|event| serde_json::from_str(event).expect("a JSON chunk"))
            .collect()
    }
}

/// A minimal HTTP/1.1 client, so the tests see exactly the bytes a real client would.
pub async fn post(address: SocketAddr, path: &str, body: &Value) -> HttpAnswer {
    request(address, "POST", path, &[], Some(body)).await
}

/// [`post`] with any method, extra headers, and a JSON body or none.
pub async fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> HttpAnswer {
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send(address, method, path, &all, payload.as_bytes()).await
}

/// A request with these headers (`content-type` among them) and this body, sent as is.
pub async fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    payload: &[u8],
) -> HttpAnswer {
    let stream = TcpStream::connect(address).await.expect("connect");
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\n\
         {extra}content-length: {}\r\nconnection: close\r\n\r\n",
        payload.len()
    )
    .into_bytes();
    request.extend_from_slice(payload);
    let mut unsent = request.as_slice();
    while !unsent.is_empty() {
        stream.writable().await.expect("writable");
        match stream.try_write(unsent) {
            Ok(written) => unsent = &unsent[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => panic!("write failed: {error}"),
        }
    }
    let mut raw = Vec::new();
    let mut buffer = [0_u8; 8192];
    loop {
        stream.readable().await.expect("readable");
        match stream.try_read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => raw.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => panic!("read failed: {error}"),
        }
    }
    let raw = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
    let head = head.to_ascii_lowercase();
    let status = head[9..12].parse().expect("a status code");
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    HttpAnswer { status, head, body }
}

/// A `multipart/form-data` body of one file part: the `content-type` header value (with its
/// boundary) and the body.
pub fn multipart(
    part_name: &str,
    filename: &str,
    content_type: &str,
    content: &[u8],
) -> (String, Vec<u8>) {
    let boundary = "stand-in-boundary-7MA4YWxkTrZu0gW";
    let mut body = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"{part_name}\"; \
         filename=\"{filename}\"\r\ncontent-type: {content_type}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn dechunk(mut encoded: &str) -> String {
    let mut decoded = String::new();
    loop {
        let (size, rest) = encoded.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
        if size == 0 {
            return decoded;
        }
        decoded.push_str(&rest[..size]);
        encoded = &rest[size + 2..];
    }
}
