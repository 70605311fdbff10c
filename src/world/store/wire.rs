//! The store's messages on the wire: a magic string when a rank connects,
//! then frames of `length (u32, little-endian) | tag (u8) | payload`.
//! Integers are little-endian, strings and byte strings carry a u32
//! length. A frame longer than `MAX_FRAME` is refused before anything is
//! allocated, so a stray connection cannot make rank 0 allocate much.

use std::io::{self, Read, Write};

/// What a rank sends first: a program on the port that is not a collbench
/// store answers something else (or nothing).
pub const MAGIC: &[u8; 18] = b"collbench-store/1\n";

/// The longest frame (the largest exchange is a few KiB per rank).
pub const MAX_FRAME: usize = 256 << 20;

/// One rank's announcement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub token: String,
    pub rank: u32,
    pub size: u32,
    /// The launcher's local rank, `u32::MAX` when it gives none.
    pub local_rank: u32,
    pub host: String,
    pub pid: u32,
    /// The port of the rank's relay listener (its children in the release
    /// tree connect there), 0 for none.
    pub relay_port: u16,
}

/// One rank in rank 0's welcome: its host and pid, and where its relay
/// listener is (rank 0's view of its address, and the port it announced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub host: String,
    pub pid: u32,
    pub relay: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// A rank, to rank 0, right after the magic.
    Hello(Hello),
    /// Rank 0, to each rank once all arrived: every rank.
    Welcome(Vec<Peer>),
    /// Rank 0 admits a rank: it now waits for the others (rank 0 keeps
    /// the time).
    Accepted,
    /// Rank 0 turns a rank away: the exit code, whether that rank prints
    /// `message` (rank 0 printed it otherwise).
    Refuse { code: u8, print: bool, message: String },
    /// One exchange (`seq` counts them): a rank's contribution to rank 0,
    /// rank 0's answer to a rank.
    Data { seq: u64, bytes: Vec<u8> },
    /// The job ends now with `code`; the rank that failed printed why.
    Abort { code: u8 },
    /// Rank 0 leaves in order: no exchange follows.
    Finish,
    /// A rank leaves in order.
    Bye,
    /// A rank, to its parent in the release tree, on the relay connection
    /// it opens there (after the magic): the job's token and its rank.
    Join { token: String, rank: u32 },
}

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const REFUSE: u8 = 3;
const DATA: u8 = 4;
const ABORT: u8 = 5;
const FINISH: u8 = 6;
const BYE: u8 = 7;
const ACCEPTED: u8 = 8;
const JOIN: u8 = 9;

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// The frame of `msg`, length first.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let mut body = Vec::new();
    match msg {
        Msg::Hello(h) => {
            body.push(HELLO);
            put_bytes(&mut body, h.token.as_bytes());
            put_u32(&mut body, h.rank);
            put_u32(&mut body, h.size);
            put_u32(&mut body, h.local_rank);
            put_bytes(&mut body, h.host.as_bytes());
            put_u32(&mut body, h.pid);
            put_u32(&mut body, u32::from(h.relay_port));
        }
        Msg::Welcome(ranks) => {
            body.push(WELCOME);
            put_u32(&mut body, ranks.len() as u32);
            for p in ranks {
                put_bytes(&mut body, p.host.as_bytes());
                put_u32(&mut body, p.pid);
                put_bytes(&mut body, p.relay.as_bytes());
            }
        }
        Msg::Join { token, rank } => {
            body.push(JOIN);
            put_bytes(&mut body, token.as_bytes());
            put_u32(&mut body, *rank);
        }
        Msg::Refuse { code, print, message } => {
            body.push(REFUSE);
            body.push(*code);
            body.push(u8::from(*print));
            put_bytes(&mut body, message.as_bytes());
        }
        Msg::Data { seq, bytes } => {
            body.push(DATA);
            body.extend_from_slice(&seq.to_le_bytes());
            put_bytes(&mut body, bytes);
        }
        Msg::Abort { code } => {
            body.push(ABORT);
            body.push(*code);
        }
        Msg::Finish => body.push(FINISH),
        Msg::Bye => body.push(BYE),
        Msg::Accepted => body.push(ACCEPTED),
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    put_u32(&mut frame, body.len() as u32);
    frame.extend_from_slice(&body);
    frame
}

pub fn write(w: &mut impl Write, msg: &Msg) -> io::Result<()> {
    w.write_all(&encode(msg))?;
    w.flush()
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a collbench store message ({what})"),
    )
}

/// A cursor over one frame's payload.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(bad("cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> io::Result<u64> {
        let lo = u64::from(self.u32()?);
        let hi = u64::from(self.u32()?);
        Ok(lo | hi << 32)
    }

    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }

    fn text(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| bad("text is not UTF-8"))
    }
}

/// The next message; an error at the end of the stream (UnexpectedEof)
/// or on anything that is not a frame of ours (InvalidData).
pub fn read(r: &mut impl Read) -> io::Result<Msg> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(bad("frame length"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let mut c = Cursor(&body[1..]);
    let msg = match body[0] {
        HELLO => Msg::Hello(Hello {
            token: c.text()?,
            rank: c.u32()?,
            size: c.u32()?,
            local_rank: c.u32()?,
            host: c.text()?,
            pid: c.u32()?,
            relay_port: u16::try_from(c.u32()?).map_err(|_| bad("port"))?,
        }),
        WELCOME => {
            let n = c.u32()? as usize;
            let mut ranks = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                ranks.push(Peer {
                    host: c.text()?,
                    pid: c.u32()?,
                    relay: c.text()?,
                });
            }
            Msg::Welcome(ranks)
        }
        JOIN => Msg::Join {
            token: c.text()?,
            rank: c.u32()?,
        },
        REFUSE => Msg::Refuse {
            code: c.u8()?,
            print: c.u8()? != 0,
            message: c.text()?,
        },
        DATA => Msg::Data {
            seq: c.u64()?,
            bytes: c.bytes()?,
        },
        ABORT => Msg::Abort { code: c.u8()? },
        FINISH => Msg::Finish,
        BYE => Msg::Bye,
        ACCEPTED => Msg::Accepted,
        _ => return Err(bad("tag")),
    };
    Ok(msg)
}

/// Reads the magic a rank sends first.
pub fn read_magic(r: &mut impl Read) -> io::Result<()> {
    let mut got = [0u8; MAGIC.len()];
    r.read_exact(&mut got)?;
    if &got == MAGIC { Ok(()) } else { Err(bad("magic")) }
}

/// Pieces of any length in one byte string (`u32` length each), and back.
pub fn join(pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        put_bytes(&mut out, p);
    }
    out
}

pub fn split(bytes: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    let mut c = Cursor(bytes);
    let mut out = Vec::new();
    while !c.0.is_empty() {
        out.push(c.bytes()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_as_written() {
        let all = [
            Msg::Hello(Hello {
                token: "slurm:12.0".into(),
                rank: 3,
                size: 4,
                local_rank: u32::MAX,
                host: "nodé".into(),
                pid: 77,
                relay_port: 40123,
            }),
            Msg::Welcome(vec![
                Peer {
                    host: "a".into(),
                    pid: 1,
                    relay: String::new(),
                },
                Peer {
                    host: "b".into(),
                    pid: 2,
                    relay: "10.0.0.2:40123".into(),
                },
            ]),
            Msg::Join {
                token: "t".into(),
                rank: 9,
            },
            Msg::Refuse {
                code: 2,
                print: true,
                message: "no".into(),
            },
            Msg::Data {
                seq: u64::MAX - 1,
                bytes: vec![0, 1, 2],
            },
            Msg::Abort { code: 5 },
            Msg::Finish,
            Msg::Bye,
            Msg::Accepted,
        ];
        let mut stream = Vec::new();
        for m in &all {
            write(&mut stream, m).unwrap();
        }
        let mut r = &stream[..];
        for m in &all {
            assert_eq!(&read(&mut r).unwrap(), m);
        }
        assert_eq!(read(&mut r).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn foreign_bytes_are_refused_without_allocating_their_length() {
        let mut huge = &b"\xff\xff\xff\xff\x04"[..];
        assert_eq!(read(&mut huge).unwrap_err().kind(), io::ErrorKind::InvalidData);
        let mut http = &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..];
        assert_eq!(read_magic(&mut http).unwrap_err().kind(), io::ErrorKind::InvalidData);
        let mut short = &b"\x05\x00\x00\x00\x04\x01"[..];
        assert!(read(&mut short).is_err());
    }

    #[test]
    fn pieces_of_any_length_split_back() {
        let pieces = vec![vec![], vec![1u8; 5], b"xyz".to_vec()];
        assert_eq!(split(&join(&pieces)).unwrap(), pieces);
    }
}
