//! iggy-sdk-check drives an Iggy server with the official Rust SDK, so the
//! test double (and kgate's Iggy topics) are checked against what Iggy's own
//! clients send and expect, not only against our reading of the protocol.
//!
//! Built twice: `--features v011` (iggy 0.11, the current 256-byte header
//! dialect of server 0.9) and `--features v010` (iggy 0.10, the legacy
//! length-prefixed dialect of server 0.8).
//!
//! Usage:
//!   iggy-sdk-check ADDR USER PASSWORD check
//!   iggy-sdk-check ADDR USER PASSWORD produce STREAM TOPIC PARTITION COUNT PREFIX
//!   iggy-sdk-check ADDR USER PASSWORD consume STREAM TOPIC PARTITION COUNT
//!   iggy-sdk-check ADDR USER PASSWORD produce-volume STREAM TOPIC PARTITION FIRST COUNT PREFIX
//!   iggy-sdk-check ADDR USER PASSWORD consume-volume STREAM TOPIC PARTITION FROM COUNT
//!
//! PARTITION is zero-based, as in Kafka and in both Iggy dialects. `consume`
//! prints one payload per line.
//!
//! The volume modes move many messages of many sizes: `produce-volume` sends
//! messages FIRST to FIRST+COUNT-1 (payloads from `volume_payload`, which the
//! Go tests compute the same way) in batches of 1,000; `consume-volume`
//! polls COUNT messages from offset FROM and prints `OFFSET LENGTH FNV1A64`
//! for each, so the caller checks every payload without reading it all back.
//! Every failed expectation exits with status 1 and says what differed.

#[cfg(feature = "v010")]
use iggy010 as iggy;
#[cfg(feature = "v011")]
use iggy011 as iggy;

use iggy::prelude::*;
use std::process::exit;
use std::str::FromStr;

// Partition ids are 0-based in both dialects.
const FIRST_PARTITION: u32 = 0;

fn fail(what: String) -> ! {
    eprintln!("iggy-sdk-check: FAIL: {what}");
    exit(1)
}

fn ensure(ok: bool, what: impl FnOnce() -> String) {
    if !ok {
        fail(what())
    }
}

fn must<T, E: std::fmt::Debug>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(format!("{what}: {e:?}")),
    }
}

fn id(name: &str) -> Identifier {
    must(Identifier::named(name), "identifier")
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: iggy-sdk-check ADDR USER PASSWORD check|produce|consume ...");
        exit(2);
    }
    let client = must(
        IggyClient::builder()
            .with_tcp()
            .with_server_address(args[1].clone())
            .build(),
        "build client",
    );
    must(client.connect().await, "connect");
    must(client.login_user(&args[2], &args[3]).await, "login");
    must(client.ping().await, "ping");
    match args[4].as_str() {
        "check" => check(&client).await,
        "produce" if args.len() == 10 => {
            let partition: u32 = must(u32::from_str(&args[7]), "partition");
            let count: u32 = must(u32::from_str(&args[8]), "count");
            produce(&client, &args[5], &args[6], partition, count, &args[9]).await
        }
        "produce-volume" if args.len() == 11 => {
            let partition: u32 = must(u32::from_str(&args[7]), "partition");
            let first: u64 = must(u64::from_str(&args[8]), "first");
            let count: u64 = must(u64::from_str(&args[9]), "count");
            produce_volume(&client, &args[5], &args[6], partition, first, count, &args[10]).await
        }
        "consume-volume" if args.len() == 10 => {
            let partition: u32 = must(u32::from_str(&args[7]), "partition");
            let from: u64 = must(u64::from_str(&args[8]), "from");
            let count: u64 = must(u64::from_str(&args[9]), "count");
            consume_volume(&client, &args[5], &args[6], partition, from, count).await
        }
        "consume" if args.len() == 9 => {
            let partition: u32 = must(u32::from_str(&args[7]), "partition");
            let count: u32 = must(u32::from_str(&args[8]), "count");
            for m in poll_all(&client, &args[5], &args[6], partition, count).await {
                println!("{}", String::from_utf8_lossy(&m.payload));
            }
        }
        _ => {
            eprintln!("iggy-sdk-check: bad arguments");
            exit(2);
        }
    }
    println!("iggy-sdk-check: OK");
}

fn message(payload: &str, header: Option<(&str, &str)>) -> IggyMessage {
    let headers = header.map(|(k, v)| {
        let mut h = std::collections::BTreeMap::new();
        h.insert(
            must(HeaderKey::try_from(k), "header key"),
            must(HeaderValue::try_from(v), "header value"),
        );
        h
    });
    must(
        IggyMessage::builder()
            .payload(payload.as_bytes().to_vec().into())
            .maybe_user_headers(headers)
            .build(),
        "message",
    )
}

async fn produce(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    count: u32,
    prefix: &str,
) {
    let mut msgs: Vec<IggyMessage> = (0..count)
        .map(|i| message(&format!("{prefix}{i}"), Some(("source", "iggy-sdk"))))
        .collect();
    send(client, stream, topic, partition, &mut msgs).await;
}

// send sends msgs to the 0-based partition of stream/topic in one batch.
async fn send(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    msgs: &mut Vec<IggyMessage>,
) {
    must(
        client
            .send_messages(
                &id(stream),
                &id(topic),
                &Partitioning::partition_id(FIRST_PARTITION + partition),
                msgs,
            )
            .await,
        "send_messages",
    );
}

async fn poll(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    strategy: &PollingStrategy,
    count: u32,
) -> PolledMessages {
    must(
        client
            .poll_messages(
                &id(stream),
                &id(topic),
                Some(FIRST_PARTITION + partition),
                &Consumer::default(),
                strategy,
                count,
                false,
            )
            .await,
        "poll_messages",
    )
}

async fn poll_all(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    count: u32,
) -> Vec<IggyMessage> {
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while (out.len() as u32) < count {
        ensure(std::time::Instant::now() < deadline, || {
            format!("timed out: {} of {count} messages", out.len())
        });
        let polled = poll(
            client,
            stream,
            topic,
            partition,
            &PollingStrategy::offset(out.len() as u64),
            count - out.len() as u32,
        )
        .await;
        for m in &polled.messages {
            // Iggy applications parse headers; a block they refuse is a defect.
            must(m.user_headers_map(), "user headers");
        }
        if polled.messages.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        out.extend(polled.messages);
    }
    out
}

// volume_payload is message i's payload in the volume modes: "PREFIXi:"
// padded with letters to 8 + (i * 7919) % 2000 bytes, so sizes spread over
// 8..2007 bytes and batches end at every kind of boundary.
fn volume_payload(prefix: &str, i: u64) -> Vec<u8> {
    let mut p = format!("{prefix}{i}:").into_bytes();
    let want = 8 + ((i * 7919) % 2000) as usize;
    while p.len() < want {
        p.push(b'a' + (p.len() % 26) as u8);
    }
    p
}

fn fnv1a64(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &c in b {
        h ^= c as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

async fn produce_volume(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    first: u64,
    count: u64,
    prefix: &str,
) {
    let mut i = first;
    while i < first + count {
        let end = (i + 1000).min(first + count);
        let mut msgs: Vec<IggyMessage> = (i..end)
            .map(|n| {
                must(
                    IggyMessage::builder()
                        .payload(volume_payload(prefix, n).into())
                        .build(),
                    "message",
                )
            })
            .collect();
        send(client, stream, topic, partition, &mut msgs).await;
        i = end;
    }
}

async fn consume_volume(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    from: u64,
    count: u64,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut next = from;
    let mut out = String::new();
    while next < from + count {
        ensure(std::time::Instant::now() < deadline, || {
            format!("timed out: {} of {count} messages", next - from)
        });
        let want = (from + count - next).min(1000) as u32;
        let polled = poll(
            client,
            stream,
            topic,
            partition,
            &PollingStrategy::offset(next),
            want,
        )
        .await;
        if polled.messages.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        for m in &polled.messages {
            if next >= from + count {
                break;
            }
            ensure(m.header.offset == next, || {
                format!("poll from {next}: message at offset {}", m.header.offset)
            });
            must(m.user_headers_map(), "user headers");
            out.push_str(&format!(
                "{} {} {:016x}\n",
                m.header.offset,
                m.payload.len(),
                fnv1a64(&m.payload)
            ));
            next += 1;
        }
    }
    print!("{out}");
}

// check runs every command kgate relies on, against a stream of its own, and
// asserts what the SDK reads back.
async fn check(client: &IggyClient) {
    let stream = format!("sdk-check-{}", IggyTimestamp::now().as_micros());
    let topic = "orders";
    must(client.create_stream(&stream).await, "create_stream");
    let streams = must(client.get_streams().await, "get_streams");
    ensure(streams.iter().any(|s| s.name == stream), || {
        format!("get_streams lacks {stream}")
    });

    let created = must(create_topic(client, &stream, topic).await, "create_topic");
    ensure(created.partitions_count == 3, || {
        format!(
            "create_topic: {} partitions, want 3",
            created.partitions_count
        )
    });
    let got = must(
        client.get_topic(&id(&stream), &id(topic)).await,
        "get_topic",
    );
    let got = got.unwrap_or_else(|| fail("get_topic: not found".into()));
    ensure(got.name == topic && got.partitions_count == 3, || {
        format!(
            "get_topic: {} with {} partitions",
            got.name, got.partitions_count
        )
    });
    ensure(
        got.message_expiry == IggyExpiry::ExpireDuration(IggyDuration::from(3_600_000_000u64)),
        || format!("get_topic: expiry {:?}", got.message_expiry),
    );
    let missing = must(
        client.get_topic(&id(&stream), &id("no-such-topic")).await,
        "get_topic (missing)",
    );
    ensure(missing.is_none(), || {
        "get_topic of a missing topic found one".into()
    });

    // A new expiry, as kgate's AlterConfigs of retention.ms sends it.
    must(
        update_expiry(client, &stream, topic, 7_200_000_000).await,
        "update_topic",
    );
    let topics = must(client.get_topics(&id(&stream)).await, "get_topics");
    let t = topics.iter().find(|t| t.name == topic);
    ensure(
        t.map(|t| {
            t.message_expiry == IggyExpiry::ExpireDuration(IggyDuration::from(7_200_000_000u64))
        }) == Some(true),
        || format!("get_topics after update_topic: {t:?}"),
    );

    // Messages on the second partition: offsets from 0, payloads, headers.
    produce(client, &stream, topic, 1, 5, "m").await;
    let mut more = vec![message("with-header", Some(("k", "v")))];
    send(client, &stream, topic, 1, &mut more).await;
    let all = poll_all(client, &stream, topic, 1, 6).await;
    for (i, m) in all.iter().enumerate() {
        ensure(m.header.offset == i as u64, || {
            format!("message {i} has offset {}", m.header.offset)
        });
        ensure(m.header.timestamp > 0, || {
            format!("message {i} has no timestamp")
        });
    }
    ensure(
        &all[0].payload[..] == b"m0" && &all[5].payload[..] == b"with-header",
        || "payloads differ".into(),
    );
    let headers = must(all[5].user_headers_map(), "user headers").unwrap_or_default();
    let v = headers.get(&must(HeaderKey::try_from("k"), "key"));
    ensure(
        v.map(|v| v.as_str().ok() == Some("v")).unwrap_or(false),
        || format!("header k: {v:?}"),
    );

    let consumer = Consumer::default();
    for (name, strategy, want) in [
        ("first", PollingStrategy::first(), 0u64),
        ("last", PollingStrategy::last(), 5),
        ("offset 3", PollingStrategy::offset(3), 3),
        (
            "timestamp",
            PollingStrategy::timestamp(all[5].header.timestamp.into()),
            5,
        ),
    ] {
        let polled = poll(client, &stream, topic, 1, &strategy, 1).await;
        ensure(polled.current_offset == 5, || {
            format!("poll {name}: current offset {}", polled.current_offset)
        });
        let got = polled.messages.first().map(|m| m.header.offset);
        ensure(got == Some(want), || {
            format!("poll {name}: offset {got:?}, want {want}")
        });
    }
    let empty = poll(client, &stream, topic, 1, &PollingStrategy::offset(6), 10).await;
    ensure(empty.messages.is_empty(), || {
        "poll past the end returned messages".into()
    });

    must(
        client
            .store_consumer_offset(
                &consumer,
                &id(&stream),
                &id(topic),
                Some(FIRST_PARTITION + 1),
                4,
            )
            .await,
        "store_consumer_offset",
    );
    let off = must(
        client
            .get_consumer_offset(
                &consumer,
                &id(&stream),
                &id(topic),
                Some(FIRST_PARTITION + 1),
            )
            .await,
        "get_consumer_offset",
    );
    ensure(off.as_ref().map(|o| o.stored_offset) == Some(4), || {
        format!("stored offset {off:?}")
    });

    must(
        client.create_partitions(&id(&stream), &id(topic), 2).await,
        "create_partitions",
    );
    let got = must(
        client.get_topic(&id(&stream), &id(topic)).await,
        "get_topic",
    );
    let n = got.map(|t| t.partitions_count).unwrap_or(0);
    ensure(n == 5, || {
        format!("after create_partitions: {n} partitions, want 5")
    });

    // Errors the SDK must see as errors.
    ensure(client.create_stream(&stream).await.is_err(), || {
        "creating a stream twice succeeded".into()
    });
    ensure(create_topic(client, &stream, topic).await.is_err(), || {
        "creating a topic twice succeeded".into()
    });

    must(
        client.delete_topic(&id(&stream), &id(topic)).await,
        "delete_topic",
    );
    must(client.delete_stream(&id(&stream)).await, "delete_stream");
    let gone = must(client.get_stream(&id(&stream)).await, "get_stream");
    ensure(gone.is_none(), || "stream still there after delete".into());
}

#[cfg(feature = "v011")]
async fn create_topic(
    client: &IggyClient,
    stream: &str,
    topic: &str,
) -> Result<TopicDetails, IggyError> {
    let options = TopicCreateOptions {
        partitions_count: Some(3),
        message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(
            3_600_000_000u64,
        ))),
        ..Default::default()
    };
    client.create_topic(&id(stream), topic, &options).await
}

#[cfg(feature = "v010")]
async fn create_topic(
    client: &IggyClient,
    stream: &str,
    topic: &str,
) -> Result<TopicDetails, IggyError> {
    client
        .create_topic(
            &id(stream),
            topic,
            3,
            CompressionAlgorithm::None,
            None,
            IggyExpiry::ExpireDuration(IggyDuration::from(3_600_000_000u64)),
            MaxTopicSize::ServerDefault,
        )
        .await
}

#[cfg(feature = "v011")]
async fn update_expiry(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    micros: u64,
) -> Result<(), IggyError> {
    let options = TopicUpdateOptions {
        message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(micros))),
        ..Default::default()
    };
    client
        .update_topic(&id(stream), &id(topic), topic, &options)
        .await
}

#[cfg(feature = "v010")]
async fn update_expiry(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    micros: u64,
) -> Result<(), IggyError> {
    client
        .update_topic(
            &id(stream),
            &id(topic),
            topic,
            CompressionAlgorithm::None,
            None,
            IggyExpiry::ExpireDuration(IggyDuration::from(micros)),
            MaxTopicSize::ServerDefault,
        )
        .await
}
