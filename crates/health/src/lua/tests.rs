//! Lua semantics health scripts rely on, each test naming the rule of Lua 5.1's reference
//! manual it checks, where gopher-lua (Argo CD's interpreter) and PUC Lua agree; and the
//! sandbox, limits and result reading of this module.

use serde_json::{Value, json};

use super::*;

/// Runs `body` (which returns a string) with `obj`, open libraries, and gives the string
/// the script returned as its `message`.
fn eval(body: &str, obj: Value) -> String {
    let source = format!(
        "local function f()\n{body}\nend\nreturn {{status = \"Healthy\", message = tostring(f())}}"
    );
    let script = LuaScript::new("test", &source, true, LuaLimits::default());
    let health = script.run(&obj).unwrap_or_else(|e| panic!("{body}: {e}"));
    health.expect("a health").message
}

fn run(source: &str, open_libs: bool) -> Result<Option<Health>, String> {
    LuaScript::new("test", source, open_libs, LuaLimits::default()).run(&json!({"kind": "X"}))
}

#[test]
fn manual_2_2_numbers_print_as_integers_when_whole() {
    // §2.2 / §5.4 `tostring`: numbers are doubles; whole ones print without a fraction
    // (both gopher-lua and PUC Lua print 3, 3.5 and -0.25 alike).
    assert_eq!(eval("return 3", json!({})), "3");
    assert_eq!(eval("return 7/2", json!({})), "3.5");
    assert_eq!(eval("return -1/4", json!({})), "-0.25");
    assert_eq!(
        eval(
            "return obj.spec.replicas + 1",
            json!({"spec": {"replicas": 2}})
        ),
        "3"
    );
    assert_eq!(eval("return 10 % 3", json!({})), "1");
    // Not whole: `%.14g` (PUC Lua's and LuaJIT's LUAI_NUMFFORMAT); gopher-lua prints Go's
    // shortest form instead (0.3333333333333333): the one documented difference.
    assert_eq!(eval("return 1/3", json!({})), "0.33333333333333");
}

#[test]
fn manual_2_5_5_length_of_a_sequence() {
    // §2.5.5: `#t` is the length of a table without holes; a JSON list becomes one.
    assert_eq!(eval("return #obj.items", json!({"items": [1, 2, 3]})), "3");
    assert_eq!(eval("return #{}", json!({})), "0");
    assert_eq!(
        eval("local t = {1, 2, 3}; t[#t + 1] = 4; return #t", json!({})),
        "4"
    );
    // A border is any n with t[n] non-nil and t[n+1] nil: with a hole only at the end
    // every implementation answers the same.
    assert_eq!(eval("local t = {1, 2, nil}; return #t", json!({})), "2");
}

#[test]
fn manual_5_4_1_string_patterns() {
    // §5.4.1: character classes, anchors, captures, `-` (lazy) and `%` escapes.
    assert_eq!(
        eval(r#"return string.match("v1.2.3", "^v(%d+)%.")"#, json!({})),
        "1"
    );
    assert_eq!(
        eval(r#"return ("Ready=True"):match("(%a+)=(%a+)")"#, json!({})),
        "Ready"
    );
    assert_eq!(
        eval(r#"return string.find("a.b", ".", 1, true)"#, json!({})),
        "2"
    );
    assert_eq!(eval(r#"return string.find("abc", "b")"#, json!({})), "2");
    assert_eq!(
        eval(r#"return (string.gsub("a-b-c", "%-", "+"))"#, json!({})),
        "a+b+c"
    );
    assert_eq!(
        eval(
            r#"return string.match("key: value", "^(.-):%s*(.*)$")"#,
            json!({})
        ),
        "key"
    );
    assert_eq!(
        eval(r#"return string.format("%d/%d", 3, 4)"#, json!({})),
        "3/4"
    );
    assert_eq!(
        eval(r#"return string.format("%s=%q", "k", "v")"#, json!({})),
        "k=\"v\""
    );
    assert_eq!(
        eval(
            r#"return string.lower("ABC") .. string.upper("d")"#,
            json!({})
        ),
        "abcD"
    );
    assert_eq!(
        eval(r#"return string.sub("Progressing", 1, 4)"#, json!({})),
        "Prog"
    );
    assert_eq!(eval(r#"return string.len("héllo")"#, json!({})), "6");
}

#[test]
fn manual_5_5_table_functions() {
    // §5.5: insert, concat, sort, getn (5.1's, used by Argo CD's own scripts).
    assert_eq!(
        eval(
            "local t = {}; table.insert(t, 'b'); table.insert(t, 1, 'a'); return table.concat(t, ',')",
            json!({})
        ),
        "a,b"
    );
    assert_eq!(
        eval(
            "local t = {3, 1, 2}; table.sort(t); return table.concat(t, '')",
            json!({})
        ),
        "123"
    );
    assert_eq!(eval("return table.getn({1, 2})", json!({})), "2");
    assert_eq!(
        eval("return select('#', unpack({1, 2, 3}))", json!({})),
        "3"
    );
}

#[test]
fn goto_continue_parses_as_in_gopher_lua() {
    // gopher-lua accepts `goto` (Lua 5.2 syntax) and Argo CD's own scripts use it; PUC Lua
    // 5.1 does not parse it.
    let body = "local n = 0\nfor _, c in ipairs(obj.c) do\n if c ~= 'x' then goto continue end\n n = n + 1\n ::continue::\nend\nreturn n";
    assert_eq!(eval(body, json!({"c": ["x", "y", "x"]})), "2");
}

#[test]
fn os_time_and_date_agree_with_gopher_lua_in_utc() {
    // §5.8 `os.date("!…")` is UTC in both; `os.time()` is a whole number of seconds.
    assert_eq!(
        eval(
            r#"return os.date("!%Y-%m-%dT%H:%M:%S", 86400 + 3661)"#,
            json!({})
        ),
        "1970-01-02T01:01:01"
    );
    assert_eq!(eval("return os.time() % 1", json!({})), "0");
    assert_eq!(
        eval(
            "return type(os.exit) .. type(os.getenv) .. type(os.remove)",
            json!({})
        ),
        "nilnilnil"
    );
}

#[test]
fn the_object_arrives_as_argo_cd_hands_it_over() {
    let obj = json!({"metadata": {"name": "c"}, "spec": {"on": true, "off": false, "none": null},
                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    assert_eq!(eval("return obj.metadata.name", obj.clone()), "c");
    assert_eq!(
        eval(
            "return tostring(obj.spec.on) .. tostring(obj.spec.off)",
            obj.clone()
        ),
        "truefalse"
    );
    assert_eq!(eval("return obj.spec.none == nil", obj.clone()), "true");
    assert_eq!(
        eval("return obj.status.conditions[1].type", obj.clone()),
        "Ready"
    );
    assert_eq!(eval("return obj.missing", obj), "nil");
}

#[test]
fn the_sandbox_leaves_out_what_argo_cd_limits_and_more() {
    for name in [
        "io",
        "debug",
        "load",
        "loadstring",
        "dofile",
        "loadfile",
        "setfenv",
        "getfenv",
        "collectgarbage",
        "jit",
        "package",
    ] {
        assert_eq!(
            eval(&format!("return type({name})"), json!({})),
            "nil",
            "{name}"
        );
    }
    // Without useOpenLibs: no string library, no string methods, no math, no require.
    let closed = run(
        "return {status = 'Healthy', message = type(string) .. type(math) .. type(require) .. type(table) .. type(os)}",
        false,
    );
    assert_eq!(closed.unwrap().unwrap().message, "nilnilniltabletable");
    let method = run("return {status = ('x'):upper()}", false).unwrap_err();
    assert!(method.contains("attempt to index"), "{method}");
    // With it, require gives the libraries by name, and nothing from files.
    let open = run(
        "local s = require('string'); return {status = s.upper('healthy'):sub(1,1) .. 'ealthy'}",
        true,
    );
    assert_eq!(open.unwrap().unwrap().status, HealthStatus::Healthy);
    let file = run("return require('socket')", true).unwrap_err();
    assert!(file.contains("module 'socket' not found"), "{file}");
}

#[test]
fn globals_of_one_call_are_gone_at_the_next() {
    let script = LuaScript::new(
        "test",
        "if seen == nil then seen = 0 end\nseen = seen + 1\nreturn {status = 'Healthy', message = tostring(seen)}",
        false,
        LuaLimits::default(),
    );
    for _ in 0..3 {
        assert_eq!(script.run(&json!({})).unwrap().unwrap().message, "1");
    }
}

#[test]
fn results_are_read_as_argo_cd_reads_them() {
    let status = |source: &str| run(source, false).map(|h| h.map(|h| (h.status, h.message)));
    assert_eq!(status("return nil"), Ok(None));
    assert_eq!(
        status("return {}"),
        Ok(None),
        "an empty table is a JSON list"
    );
    assert_eq!(
        status("return {'Healthy'}"),
        Ok(None),
        "a list is no health"
    );
    assert_eq!(
        status("return {status = 'Degraded', message = 'broken'}"),
        Ok(Some((HealthStatus::Degraded, "broken".into())))
    );
    assert_eq!(
        status("return {Status = 'Suspended'}"),
        Ok(Some((HealthStatus::Suspended, String::new()))),
        "keys match without regard to case"
    );
    assert_eq!(
        status("return {status = 'Fine'}"),
        Ok(Some((
            HealthStatus::Unknown,
            "Lua returned an invalid health status".into()
        )))
    );
    assert_eq!(
        status("return {message = 'no status'}"),
        Ok(Some((
            HealthStatus::Unknown,
            "Lua returned an invalid health status".into()
        )))
    );
    assert_eq!(
        status("return {status = 5}"),
        Ok(None),
        "a status of another type"
    );
    assert_eq!(
        status("return 'Healthy'"),
        Err("expect table output from Lua script, not string".into())
    );
}

#[test]
fn errors_name_the_script_and_line() {
    let e = run("local x = nil\nreturn x.field", false).unwrap_err();
    assert!(e.starts_with("test:2:"), "{e}");
    let e = run("return {", false).unwrap_err();
    assert!(e.starts_with("test:"), "{e}");
    let e = run("error('custom failure')", false).unwrap_err();
    assert!(e.contains("custom failure"), "{e}");
}

#[test]
fn an_endless_script_stops_at_its_instruction_budget() {
    let limits = LuaLimits {
        instructions: 100_000,
        ..LuaLimits::default()
    };
    let script = LuaScript::new("loop", "while true do end", false, limits);
    let e = script.run(&json!({})).unwrap_err();
    assert!(e.contains("budget of 100000 Lua instructions"), "{e}");
    // A script within its budget runs as often as asked, with the budget renewed per call.
    let counted = LuaScript::new(
        "count",
        "local n = 0 for i = 1, 20000 do n = n + i end return {status = 'Healthy'}",
        false,
        limits,
    );
    for _ in 0..5 {
        assert!(counted.run(&json!({})).unwrap().is_some());
    }
}

#[test]
fn a_script_allocating_without_bound_stops_at_its_memory_limit() {
    let limits = LuaLimits {
        memory_bytes: 4 << 20,
        ..LuaLimits::default()
    };
    let script = LuaScript::new(
        "hog",
        "local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 64) .. i end return {status = 'Healthy'}",
        true,
        limits,
    );
    let e = script.run(&json!({})).unwrap_err();
    assert!(e.contains("memory limit"), "{e}");
}

#[test]
fn garbage_of_earlier_calls_never_counts_against_a_later_call() {
    let limits = LuaLimits {
        memory_bytes: 4 << 20,
        ..LuaLimits::default()
    };
    // About 1 MiB of garbage per call: fifty calls would pass 4 MiB without collections.
    let script = LuaScript::new(
        "churn",
        "local t = {} for i = 1, 8000 do t[i] = string.rep('x', 100) .. i end return {status = 'Healthy'}",
        true,
        limits,
    );
    for _ in 0..50 {
        assert!(script.run(&json!({})).unwrap().is_some());
    }
}
