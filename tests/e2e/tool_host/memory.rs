//! The `memory` plugin's tools against the tool-host, on both backends: what is put is got
//! and found by full text (the database's own engine) within its namespace and below, never
//! by another user; a query is words only, whatever it holds; an item expires; values,
//! namespaces and the user's quota are bounded, and a refused put leaves everything as it was.

use super::*;

on_both_backends!(
    what_is_put_is_got_found_by_its_words_and_deleted_and_no_other_user_sees_it,
    queries_with_the_engines_own_syntax_are_only_words,
    an_item_expires_and_its_bytes_are_freed,
    values_namespaces_and_the_quota_are_bounded,
    a_user_keeps_at_most_a_thousand_items_and_another_user_is_not_held_by_it,
);

async fn memory_host(database: &TestDatabase) -> anyhow::Result<TestToolHost> {
    TestToolHost::start(database, &["memory"]).await
}

async fn call(
    tools: &mut ToolHostClient<Channel>,
    user: &str,
    tool: &str,
    input: Value,
) -> anyhow::Result<Result<Value, String>> {
    let answer = tools
        .invoke_once(invoke(tool, user, input))
        .await?
        .into_inner();
    Ok(match output(&answer) {
        Ok(value) => Ok(value),
        Err(_) => Err(tool_error(&answer)?.to_owned()),
    })
}

fn keys(found: &Value) -> Vec<String> {
    found["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| {
                    format!(
                        "{}/{}",
                        item["namespace"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|part| part.as_str().unwrap())
                            .collect::<Vec<_>>()
                            .join("/"),
                        item["key"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn what_is_put_is_got_found_by_its_words_and_deleted_and_no_other_user_sees_it(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = memory_host(database).await?;
    let mut tools = host.tools().await?;
    for (namespace, key, value) in [
        (
            json!(["prefs"]),
            "dinner",
            json!({"likes": ["Sushi", "ramen"], "spicy": true}),
        ),
        (
            json!(["prefs", "travel"]),
            "seat",
            json!("window seat, never the middle"),
        ),
        (
            json!(["projects", "apollo"]),
            "owner",
            json!({"name": "Ada"}),
        ),
    ] {
        let put = call(
            &mut tools,
            "alice",
            "memory.put",
            json!({"namespace": namespace, "key": key, "value": value}),
        )
        .await?;
        assert!(put.is_ok(), "{put:?}");
    }
    let got = call(
        &mut tools,
        "alice",
        "memory.get",
        json!({"namespace": ["prefs"], "key": "dinner"}),
    )
    .await?
    .unwrap();
    assert_eq!(got["value"]["likes"][0], "Sushi");
    let found = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "sushi"}),
    )
    .await?
    .unwrap();
    assert_eq!(keys(&found), ["prefs/dinner"]);
    // Every word must be there; the namespace narrows to itself and below.
    let found = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "window middle"}),
    )
    .await?
    .unwrap();
    assert_eq!(keys(&found), ["prefs/travel/seat"]);
    let below = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "prefs", "namespace": ["prefs"]}),
    )
    .await?
    .unwrap();
    assert_eq!(keys(&below).len(), 2, "{below}");
    let elsewhere = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "sushi", "namespace": ["projects"]}),
    )
    .await?
    .unwrap();
    assert!(keys(&elsewhere).is_empty());
    // bob finds nothing of hers, by search or by key.
    let his = call(
        &mut tools,
        "bob",
        "memory.search",
        json!({"query": "sushi"}),
    )
    .await?
    .unwrap();
    assert!(keys(&his).is_empty());
    let his = call(
        &mut tools,
        "bob",
        "memory.get",
        json!({"namespace": ["prefs"], "key": "dinner"}),
    )
    .await?;
    assert!(his.unwrap_err().contains("nothing is remembered"));
    // Putting again replaces; deleting forgets.
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["prefs"], "key": "dinner", "value": "tacos"}),
    )
    .await?
    .unwrap();
    let found = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "sushi"}),
    )
    .await?
    .unwrap();
    assert!(
        keys(&found).is_empty(),
        "the old value's words went with it"
    );
    let deleted = call(
        &mut tools,
        "alice",
        "memory.delete",
        json!({"namespace": ["prefs"], "key": "dinner"}),
    )
    .await?
    .unwrap();
    assert_eq!(deleted["deleted"], true);
    let again = call(
        &mut tools,
        "alice",
        "memory.delete",
        json!({"namespace": ["prefs"], "key": "dinner"}),
    )
    .await?
    .unwrap();
    assert_eq!(again["deleted"], false);
    Ok(())
}

async fn queries_with_the_engines_own_syntax_are_only_words(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = memory_host(database).await?;
    let mut tools = host.tools().await?;
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["notes"], "key": "k", "value": "alpha beta"}),
    )
    .await?
    .unwrap();
    for query in [
        "\"alpha",
        "alpha*",
        "NEAR(alpha beta)",
        "alpha OR zeta",
        "alpha AND -beta",
        "a:b",
        "'; DROP TABLE memory_items; --",
        "!!!",
        "(((",
        "alpha & | ! beta",
        "\u{0}alpha",
    ] {
        let found = call(
            &mut tools,
            "alice",
            "memory.search",
            json!({"query": query}),
        )
        .await?;
        assert!(found.is_ok(), "{query:?}: {found:?}");
    }
    let found = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "alpha*"}),
    )
    .await?
    .unwrap();
    assert_eq!(keys(&found), ["notes/k"]);
    Ok(())
}

async fn an_item_expires_and_its_bytes_are_freed(database: &TestDatabase) -> anyhow::Result<()> {
    let host = memory_host(database).await?;
    let mut tools = host.tools().await?;
    let mut artifacts = host.artifacts().await?;
    let usage = |user: &str| agentic_proto::v1::GetArtifactUsageRequest {
        user_id: user.into(),
    };
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["tmp"], "key": "code", "value": "one-time 4242", "ttl_seconds": 1}),
    )
    .await?
    .unwrap();
    let held = artifacts
        .get_artifact_usage(usage("alice"))
        .await?
        .into_inner()
        .bytes;
    assert!(held > 0);
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let gone = call(
        &mut tools,
        "alice",
        "memory.get",
        json!({"namespace": ["tmp"], "key": "code"}),
    )
    .await?;
    assert!(gone.is_err(), "{gone:?}");
    let found = call(
        &mut tools,
        "alice",
        "memory.search",
        json!({"query": "4242"}),
    )
    .await?
    .unwrap();
    assert!(keys(&found).is_empty());
    // The next write deletes it, and its bytes leave the quota.
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["tmp"], "key": "x", "value": 1}),
    )
    .await?
    .unwrap();
    let now = artifacts
        .get_artifact_usage(usage("alice"))
        .await?
        .into_inner()
        .bytes;
    assert!(now < held, "{now} < {held}");
    Ok(())
}

async fn values_namespaces_and_the_quota_are_bounded(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = TestToolHost::start_with(
        database,
        &["memory"],
        tool_host::StorageLimits {
            max_artifact_bytes: 1024 * 1024,
            user_quota_bytes: 100_000,
        },
    )
    .await?;
    let mut tools = host.tools().await?;
    let big = call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "k", "value": "x".repeat(70_000)}),
    )
    .await?;
    assert!(big.unwrap_err().contains("at most 65536"));
    for namespace in [
        json!([]),
        json!(["a/b"]),
        json!(["a b"]),
        json!(vec!["a"; 9]),
    ] {
        let refused = call(
            &mut tools,
            "alice",
            "memory.put",
            json!({"namespace": namespace, "key": "k", "value": 1}),
        )
        .await?;
        assert!(refused.is_err(), "{namespace}");
    }
    // A NUL in a value is kept (and found by its words) on both backends; a key holds no
    // control character.
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "nul", "value": {"a\u{0}b": "x\u{0}yz"}}),
    )
    .await?
    .unwrap();
    let got = call(
        &mut tools,
        "alice",
        "memory.get",
        json!({"namespace": ["n"], "key": "nul"}),
    )
    .await?
    .unwrap();
    assert_eq!(got["value"]["a\u{0}b"], "x\u{0}yz");
    let found = call(&mut tools, "alice", "memory.search", json!({"query": "yz"}))
        .await?
        .unwrap();
    assert_eq!(keys(&found), ["n/nul"]);
    call(
        &mut tools,
        "alice",
        "memory.delete",
        json!({"namespace": ["n"], "key": "nul"}),
    )
    .await?
    .unwrap();
    for key in ["line\nbreak", "nul\u{0}"] {
        let refused = call(
            &mut tools,
            "alice",
            "memory.put",
            json!({"namespace": ["n"], "key": key, "value": 1}),
        )
        .await?;
        assert!(
            refused.unwrap_err().contains("control characters"),
            "{key:?}"
        );
    }
    // 60,000 bytes fit once; the second item passes the 100,000-byte quota and changes nothing.
    let value = "y".repeat(30_000);
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "one", "value": value}),
    )
    .await?
    .unwrap();
    let over = call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "two", "value": value}),
    )
    .await?;
    assert!(over.unwrap_err().contains("quota"), "over the quota");
    let two = call(
        &mut tools,
        "alice",
        "memory.get",
        json!({"namespace": ["n"], "key": "two"}),
    )
    .await?;
    assert!(two.is_err());
    // Replacing the one she has fits (its old bytes are freed first), and bob's own quota is his.
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "one", "value": value}),
    )
    .await?
    .unwrap();
    call(
        &mut tools,
        "bob",
        "memory.put",
        json!({"namespace": ["n"], "key": "one", "value": value}),
    )
    .await?
    .unwrap();
    Ok(())
}

async fn a_user_keeps_at_most_a_thousand_items_and_another_user_is_not_held_by_it(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = memory_host(database).await?;
    let mut tools = host.tools().await?;
    for n in 0..1_000 {
        let put = call(
            &mut tools,
            "alice",
            "memory.put",
            json!({"namespace": ["n"], "key": format!("k{n}"), "value": n}),
        )
        .await?;
        assert!(put.is_ok(), "{n}: {put:?}");
    }
    let full = call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "one-more", "value": 1}),
    )
    .await?;
    assert!(
        full.unwrap_err().contains("1000 memory items"),
        "the 1,001st is refused"
    );
    // Replacing one she has is no new item.
    call(
        &mut tools,
        "alice",
        "memory.put",
        json!({"namespace": ["n"], "key": "k0", "value": "new"}),
    )
    .await?
    .unwrap();
    call(
        &mut tools,
        "bob",
        "memory.put",
        json!({"namespace": ["n"], "key": "k0", "value": 1}),
    )
    .await?
    .unwrap();
    Ok(())
}
