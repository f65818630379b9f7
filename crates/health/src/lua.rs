//! Lua health scripts, run as Argo CD runs them (gopher-lua: Lua 5.1 with `goto`), on
//! LuaJIT through mlua.
//!
//! - **Compiled once.** A [`LuaScript`] compiles its source the first time it runs, into an
//!   interpreter that is kept and reused (a small pool, one interpreter per concurrent
//!   caller); a script that does not compile says so at every call, as Argo CD's does.
//! - **Fresh globals per call.** Each call runs the compiled chunk in a new global table
//!   whose reads fall back to the sandbox's libraries, with `obj` (the live object) set:
//!   what one call assigns to a global is gone at the next, as with Argo CD's new state per
//!   call.
//! - **Sandbox.** Always: the base functions (`assert`, `error`, `ipairs`, `next`, `pairs`,
//!   `pcall`, `select`, `tonumber`, `tostring`, `type`, `unpack`, `xpcall`, `rawequal`,
//!   `rawget`, `rawset`, `setmetatable`, `getmetatable`, `print` — which prints nothing),
//!   `table`, and `os` with only `time` and `date` (Argo CD's safe `os`). With
//!   `useOpenLibs` also `string` (and the string methods), `math`, `coroutine` and a
//!   `require` that returns those libraries by name. Never: `io`, `debug`, `load`,
//!   `loadstring`, `loadfile`, `dofile`, `setfenv`/`getfenv`, `collectgarbage`, `jit`,
//!   the rest of `os` — Argo CD's open libraries include `io` and a `require` that reads
//!   files; fleetshard leaves them out.
//! - **Limits per call** ([`LuaLimits`]): an instruction budget (counted by a hook every
//!   1,000 VM instructions, the JIT compiler off so the hook always runs) instead of Argo CD's
//!   one-second wall-clock timeout — deterministic, so a test can show it —, and a memory
//!   limit per interpreter. A script past either fails with a message saying which; its
//!   interpreter is dropped.
//! - **Values.** The object reaches the script as Argo CD hands it over: maps as tables with
//!   string keys, lists as tables indexed from 1, numbers as Lua numbers (doubles), `null`
//!   as `nil`.
//! - **Result** ([`LuaScript::run`]), as Argo CD reads it: `nil`, an empty table or a list →
//!   no health; a table with `status` and `message` (keys matched without regard to case,
//!   as Go's JSON decoding does) → that health, a status other than Argo CD's six →
//!   Unknown "Lua returned an invalid health status", a `status` or `message` that is not a
//!   string → no health; any other value → an error "expect table output from Lua script,
//!   not …".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value as LuaValue, VmState};
use serde_json::Value;

use crate::{Health, HealthStatus};

/// Instructions between two checks of the budget.
const HOOK_EVERY: u32 = 1000;

/// Interpreters kept per script when idle.
const POOL_SIZE: usize = 8;

/// Bounds of one call of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuaLimits {
    /// Lua VM instructions one call may run (checked every 1,000).
    pub instructions: u64,
    /// Bytes an interpreter may allocate (its compiled script, libraries and the call's
    /// values).
    pub memory_bytes: usize,
}

impl Default for LuaLimits {
    /// 50 million instructions (tens of milliseconds; Argo CD's bound is one second of
    /// wall-clock time) and 64 MiB.
    fn default() -> Self {
        LuaLimits {
            instructions: 50_000_000,
            memory_bytes: 64 << 20,
        }
    }
}

/// A health script, compiled at its first run and kept compiled.
pub struct LuaScript {
    /// Where it comes from (`resource.customizations.health.cert-manager.io_Certificate`,
    /// a file path): the chunk name in its error messages.
    name: String,
    source: Arc<str>,
    open_libs: bool,
    limits: LuaLimits,
    idle: Mutex<Vec<Interpreter>>,
}

impl std::fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaScript")
            .field("name", &self.name)
            .field("open_libs", &self.open_libs)
            .finish_non_exhaustive()
    }
}

impl LuaScript {
    /// A script named `name` (for messages), with the standard libraries of `useOpenLibs`
    /// when `open_libs`; compiled at its first run.
    pub fn new(name: &str, source: &str, open_libs: bool, limits: LuaLimits) -> LuaScript {
        LuaScript {
            name: name.to_owned(),
            source: source.into(),
            open_libs,
            limits,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Where the script comes from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it runs with `useOpenLibs`.
    pub fn open_libs(&self) -> bool {
        self.open_libs
    }

    /// Compiles the script now (the first run would), so a syntax error shows early.
    pub fn compile(&self) -> Result<(), String> {
        let interpreter = self.take()?;
        self.give_back(interpreter);
        Ok(())
    }

    /// Runs the script on `obj`: `Ok(None)` when it gives no health, `Err` with a message
    /// when it fails (compile error, runtime error, a limit, a result of the wrong type).
    pub fn run(&self, obj: &Value) -> Result<Option<Health>, String> {
        let interpreter = self.take()?;
        match interpreter.call(obj, &self.limits) {
            Ok(result) => {
                self.give_back(interpreter);
                Ok(result)
            }
            // A failed call may leave the interpreter's memory or hook state anywhere.
            Err(message) => Err(message),
        }
    }

    fn take(&self) -> Result<Interpreter, String> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(i) => Ok(i),
            None => Interpreter::new(&self.name, &self.source, self.open_libs, &self.limits),
        }
    }

    fn give_back(&self, interpreter: Interpreter) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < POOL_SIZE {
            idle.push(interpreter);
        }
    }
}

/// One Lua state holding the compiled script and the sandbox's libraries.
struct Interpreter {
    lua: Lua,
    chunk: Function,
    /// What a call's globals fall back to (`__index`).
    fallback: Table,
    /// Instructions left in this call, in units of [`HOOK_EVERY`].
    budget: Arc<AtomicU64>,
    /// Memory in use once the script is compiled (libraries, the compiled chunk).
    baseline: usize,
}

impl Interpreter {
    fn new(
        name: &str,
        source: &str,
        open_libs: bool,
        limits: &LuaLimits,
    ) -> Result<Interpreter, String> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::JIT;
        let lua = Lua::new_with(libs, LuaOptions::default())
            .map_err(|e| format!("{name}: cannot start a Lua interpreter: {e}"))?;
        let setup = |e: mlua::Error| format!("{name}: cannot set up the Lua sandbox: {e}");
        // Hooks never run inside JIT-compiled code: the budget needs the interpreter.
        lua.load("jit.off()").exec().map_err(setup)?;
        let fallback = sandbox(&lua, open_libs).map_err(setup)?;
        // The limit is set after the libraries are loaded: it bounds what scripts allocate.
        let _ = lua.set_memory_limit(lua.used_memory() + limits.memory_bytes);
        let budget = Arc::new(AtomicU64::new(0));
        let left = budget.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                if left.fetch_sub(1, Ordering::Relaxed) == 0 {
                    left.store(0, Ordering::Relaxed);
                    return Err(mlua::Error::runtime("instruction budget exhausted"));
                }
                Ok(VmState::Continue)
            },
        )
        .map_err(setup)?;
        let chunk = lua
            .load(source)
            .set_name(format!("={name}"))
            .into_function()
            .map_err(|e| error_text(&e))?;
        let baseline = lua.used_memory();
        Ok(Interpreter {
            lua,
            chunk,
            fallback,
            budget,
            baseline,
        })
    }

    fn call(&self, obj: &Value, limits: &LuaLimits) -> Result<Option<Health>, String> {
        let lua = &self.lua;
        let internal = |e: mlua::Error| error_text(&e);
        let globals = lua.create_table().map_err(internal)?;
        let meta = lua.create_table().map_err(internal)?;
        meta.set("__index", &self.fallback).map_err(internal)?;
        globals.set_metatable(Some(meta)).map_err(internal)?;
        globals.set("_G", &globals).map_err(internal)?;
        globals.set("obj", to_lua(lua, obj)?).map_err(internal)?;
        self.chunk.set_environment(globals).map_err(internal)?;
        self.budget.store(
            limits.instructions / u64::from(HOOK_EVERY),
            Ordering::Relaxed,
        );
        let returned = self.chunk.call::<LuaValue>(()).map_err(|e| {
            if self.budget.load(Ordering::Relaxed) == 0 {
                format!(
                    "the script ran past its budget of {} Lua instructions",
                    limits.instructions
                )
            } else {
                error_text(&e)
            }
        })?;
        let health = health_of(&returned);
        drop(returned);
        // The call's values are garbage now. A full collection costs more than the call;
        // it runs once garbage fills half the memory limit, so that garbage never makes a
        // later call fail its limit.
        if lua.used_memory() > self.baseline + limits.memory_bytes / 2 {
            let _ = lua.gc_collect();
        }
        health
    }
}

/// The sandbox's libraries, as a table a call's globals fall back to.
fn sandbox(lua: &Lua, open_libs: bool) -> mlua::Result<Table> {
    let g = lua.globals();
    let fallback = lua.create_table()?;
    for name in [
        "assert",
        "error",
        "ipairs",
        "next",
        "pairs",
        "pcall",
        "select",
        "tonumber",
        "tostring",
        "type",
        "unpack",
        "xpcall",
        "rawequal",
        "rawget",
        "rawset",
        "setmetatable",
        "getmetatable",
        "_VERSION",
    ] {
        fallback.set(name, g.get::<LuaValue>(name)?)?;
    }
    fallback.set(
        "print",
        lua.create_function(|_, _: mlua::MultiValue| Ok(()))?,
    )?;
    fallback.set("table", g.get::<Table>("table")?)?;
    let os: Table = g.get("os")?;
    let safe_os = lua.create_table()?;
    safe_os.set("time", os.get::<Function>("time")?)?;
    safe_os.set("date", os.get::<Function>("date")?)?;
    fallback.set("os", safe_os)?;
    if open_libs {
        for name in ["string", "math", "coroutine"] {
            fallback.set(name, g.get::<LuaValue>(name)?)?;
        }
        let libs = fallback.clone();
        let require = lua.create_function(move |_, name: String| {
            match libs.raw_get::<LuaValue>(name.as_str())? {
                LuaValue::Table(t) if matches!(name.as_str(), "string" | "math" | "table" | "os" | "coroutine") => {
                    Ok(t)
                }
                _ => Err(mlua::Error::runtime(format!(
                    "module '{name}' not found: only string, math, table, os and coroutine can be required"
                ))),
            }
        })?;
        fallback.set("require", require)?;
    } else {
        // Argo CD opens no string library without useOpenLibs: string values have no
        // methods either.
        lua.set_type_metatable::<mlua::LuaString>(None);
    }
    Ok(fallback)
}

/// `value` as a Lua value, as Argo CD converts the object for its scripts.
fn to_lua(lua: &Lua, value: &Value) -> Result<LuaValue, String> {
    let err = |e: mlua::Error| format!("converting the object for Lua: {e}");
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => LuaValue::String(lua.create_string(s).map_err(err)?),
        Value::Array(items) => {
            let t = lua
                .create_table_with_capacity(items.len(), 0)
                .map_err(err)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?).map_err(err)?;
            }
            LuaValue::Table(t)
        }
        Value::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len()).map_err(err)?;
            for (k, v) in map {
                t.raw_set(k.as_str(), to_lua(lua, v)?).map_err(err)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// The health a script's return value stands for (see the module's documentation).
fn health_of(returned: &LuaValue) -> Result<Option<Health>, String> {
    let table = match returned {
        LuaValue::Nil => return Ok(None),
        LuaValue::Table(t) => t,
        other => {
            return Err(format!(
                "expect table output from Lua script, not {}",
                lua_type_name(other)
            ));
        }
    };
    // Argo CD encodes the table as JSON first: an empty table or one with list entries is
    // a JSON list, which is no health.
    if table.raw_len() > 0 || table.clone().pairs::<LuaValue, LuaValue>().next().is_none() {
        return Ok(None);
    }
    let mut status: Option<LuaValue> = None;
    let mut message: Option<LuaValue> = None;
    for pair in table.clone().pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair.map_err(|e| error_text(&e))?;
        let LuaValue::String(key) = key else {
            return Err("the returned table has a key that is not a string".to_owned());
        };
        let key = key.to_string_lossy();
        // Go's JSON decoding prefers the exact field name, else any case.
        for (field, slot) in [("status", &mut status), ("message", &mut message)] {
            if key == field || (key.eq_ignore_ascii_case(field) && slot.is_none()) {
                *slot = Some(value.clone());
            }
        }
    }
    let text = |v: Option<LuaValue>| -> Option<Option<String>> {
        match v {
            None | Some(LuaValue::Nil) => Some(None),
            Some(LuaValue::String(s)) => Some(Some(s.to_string_lossy())),
            Some(_) => None,
        }
    };
    let (Some(status), Some(message)) = (text(status), text(message)) else {
        // A status or message of another type fails Go's decoding, which Argo CD reads as
        // no health.
        return Ok(None);
    };
    let message = message.unwrap_or_default();
    match status.as_deref().and_then(HealthStatus::parse) {
        Some(status) => Ok(Some(Health::new(status, message))),
        None => Ok(Some(Health::new(
            HealthStatus::Unknown,
            "Lua returned an invalid health status",
        ))),
    }
}

/// Lua's name of a value's type, as `type()` says it.
fn lua_type_name(v: &LuaValue) -> &'static str {
    match v {
        LuaValue::Nil => "nil",
        LuaValue::Boolean(_) => "boolean",
        LuaValue::Number(_) | LuaValue::Integer(_) => "number",
        LuaValue::String(_) => "string",
        LuaValue::Table(_) => "table",
        LuaValue::Function(_) => "function",
        LuaValue::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// An error's message without mlua's traceback.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => {
            m.lines().next().unwrap_or_default().to_owned()
        }
        mlua::Error::MemoryError(_) => "the script ran out of its memory limit".to_owned(),
        other => other
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

#[cfg(test)]
mod tests;
