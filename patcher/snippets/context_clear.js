function _ctxpatchContextClearing(value, mode) {
  // ctxpatch: ask the API to clear old tool results on its own copy of the prompt
  // (server-side context editing, edit "clear_tool_uses_20250919", beta
  // "context-management-2025-06-27"). The client's history is never touched, so
  // the thinking-binding check of the API never sees an edit.
  //
  // Injected by ctxpatch at two places of the query loop's request code:
  //   _ctxpatchContextClearing(REQUEST)          where the request parameters are
  //                                              built: returns new parameters with
  //                                              the edit and the beta added;
  //   _ctxpatchContextClearing(PENDING, "watch") around the request call: returns
  //                                              PENDING itself, after noting a 400
  //                                              that refuses the edit.
  // Plain ES2017, no dependencies. The parsing of the settings has a Python twin,
  // engine/context_editing.py knobs_from_env; tests/differential checks the two.
  //
  // Settings, read from process.env on every request:
  //   CLAUDE_CTX_CLEAR_TRIGGER        clear once the prompt reaches this many input
  //                                   tokens (integer >= 1; default below)
  //   CLAUDE_CTX_CLEAR_KEEP           the most recent tool uses kept (integer >= 0)
  //   CLAUDE_CTX_CLEAR_AT_LEAST       clear only if at least this many tokens go
  //                                   (integer >= 0; 0 = no minimum)
  //   CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS  comma list of tools whose results stay
  //   CLAUDE_CTX_CLEAR_TOOL_INPUTS    1/true: also clear the inputs of cleared tool
  //                                   uses; 0/false: never; else a comma list of tools
  //   CLAUDE_CTX_CLEAR_STEP           the cleared part moves only every STEP tool uses
  //                                   (integer >= 1): the edit keeps between KEEP and
  //                                   KEEP + STEP - 1 uses, so the prompt cache is
  //                                   rewritten once per STEP uses, not on every one
  //   CLAUDE_CTX_CLEAR_POLICY         paid (default): the cleared part moves only when
  //                                   the move pays for the cache it rewrites, or when
  //                                   the messages kept reach CEILING; fixed: every STEP
  //                                   tool uses (the rule before the policy)
  //   CLAUDE_CTX_CLEAR_CEILING        paid: move whatever it costs once the messages kept
  //                                   reach this many tokens of 4 characters and the move
  //                                   frees at least a tenth of that (integer >= 1;
  //                                   default 90000 at a 200K window, scaled to the
  //                                   request's: 521138 for a [1m] model)
  //   CLAUDE_CTX_CLEAR_PATIENCE       paid: percent of the break-even rent paid before a
  //                                   move (integer >= 0; 100 = break even)
  //   CLAUDE_CTX_CLEAR_FREE           paid: the free move (on unless 0/false/no/off): where
  //                                   the prompt cache breaks anyway (an older message
  //                                   changed, the list got shorter) or has expired (the
  //                                   conversation's last request came more than the cache's
  //                                   lifetime, 5 min or 1 h, plus 10 s before), the cleared
  //                                   part moves as far as it may and stays there until a
  //                                   compaction
  //   CLAUDE_CTX_CLEAR_MARGIN         paid, with FREE on: the near move (integer >= 0; default
  //                                   10000; 0 = never): once a reply reports a prompt within
  //                                   MARGIN tokens of Claude Code's auto-compact threshold,
  //                                   the conversation's next request moves as a free move does
  //                                   where the move frees at least MARGIN tokens of 4
  //                                   characters
  //   CLAUDE_CTX_CLEAR_DISABLE=1      off (also true/yes/on)
  //   CLAUDE_CTX_CLEAR_DEBUG=FILE     append one JSON line per decision to FILE
  //                                   (default: CLAUDE_TEXT_PRUNE_DEBUG)
  //   CTXPATCH_LEDGER=0               no ledger line (also false/no/off; see below)
  // An integer is ASCII digits (1 to 9 of them, "_" separators allowed, blanks
  // around ignored); any other value means the default, never a bad request.
  // Defaults (engine/twins/context_clear.py DEFAULT_*, docs/clearing-defaults.md): TRIGGER
  // 30000, KEEP 1 (50000 and 3 under POLICY=fixed), STEP 20, TOOL_INPUTS 1, no AT_LEAST. The
  // keep sent is also never below the tool results of the round in progress (twin:
  // edit_for_request).
  //
  // Never sent: when disabled; under Bedrock, Vertex or Foundry
  // (CLAUDE_CODE_USE_BEDROCK / _VERTEX / _FOUNDRY); to Claude 3 models (they do not
  // support context editing); when the request has no betas list (Claude Code
  // sends betas only where the endpoint takes them); with CLAUDE_CTX_CLEAR_WINDOW_GUARD=1, once
  // the prompt nears Claude Code's auto-compact threshold (nearWindow, below); when Claude Code already sends
  // its own clear_tool_uses edit; and, for the rest of the process, to a model the
  // API refused it for (HTTP 400 naming clear_tool_uses_20250919 or
  // context_management). clear_thinking_20251015 stays first in the edits list, as
  // the API requires. The input is never mutated (new objects are built); any error
  // sends the request unchanged; nothing is written to stdout/stderr; the debug file
  // is written asynchronously and never blocks (a FIFO without a reader is skipped).
  //
  // The ledger (usage/ledger.py, the same file and line format as the gateway's, src "cli.js"):
  // one JSON line per watched request, numbers and ids only: the time, Claude Code's session id
  // (the session_id in the request's metadata.user_id, a JSON string in 2.1.x, "..._session_<uuid>"
  // before; the X-Claude-Code-Session-Id header holds the same id but is not visible here), the
  // model, the HTTP status, the request-id, the reply's usage and context_management.applied_edits
  // (read from a clone of the SDK's fetch Response: SSE lines message_start / message_delta, or the
  // parsed JSON reply; or from a 1.0.x MessageStream's events), whether the edit was added /
  // skipped / lost and why, and cut when the reply broke off. Written to the XDG state dir as
  // platformdirs.user_state_dir("ctxpatch") gives it ($XDG_STATE_HOME, else ~/.local/state on
  // Linux, ~/Library/Application Support on macOS; none on Windows) + /ledger/ledger.jsonl,
  // directory 700, file 600, O_APPEND, rotated past LEDGER_MAX_BYTES (LEDGER_KEEP files kept;
  // tests/patcher/test_ledger_js.py holds them equal to usage/ledger.py's) by the debug log's
  // queued writer. Reading never delays, changes or fails the reply Claude Code reads. The same
  // reading gives the near move its prompt (message_start's usage, or a JSON reply's); with the
  // ledger off and the near move on, the copy is read up to message_start only, then cancelled.
  var BETA = "context-management-2025-06-27";
  var CLEAR_TOOL_USES = "clear_tool_uses_20250919";
  var CLEAR_THINKING = "clear_thinking_20251015";
  var DEFAULT_TRIGGER = 50000; // the fixed STEP rule's
  var DEFAULT_PAID_TRIGGER = 30000; // the paid policy's (twin: DEFAULT_PAID_TRIGGER)
  var DEFAULT_KEEP = 3; // the fixed STEP rule's
  var DEFAULT_PAID_KEEP = 1; // the paid policy's (twin: DEFAULT_PAID_KEEP)
  var DEFAULT_AT_LEAST = 0;
  var DEFAULT_TOOL_INPUTS = true;
  var DEFAULT_STEP = 20;
  var DEFAULT_POLICY = "paid";
  var DEFAULT_CEILING = 90000;
  var CEILING_SHARE = 10; // a move the ceiling forces frees at least 1/10 of it (twin: CEILING_SHARE)
  var CEILING_THRESHOLD = 167000; // the threshold DEFAULT_CEILING was measured at (twin: CEILING_THRESHOLD)
  var DEFAULT_PATIENCE = 100;
  var TRUE_WORDS = ["1", "true", "yes", "on"];
  var LEDGER_MAX_BYTES = 8388608; // usage/ledger.py MAX_BYTES
  var LEDGER_KEEP = 4; // usage/ledger.py KEEP

  function isObject(x) {
    return x !== null && typeof x === "object";
  }

  // Python's str.isspace() set, so that blanks are stripped exactly like the twin does.
  function isBlank(code) {
    return (
      (code >= 9 && code <= 13) ||
      (code >= 28 && code <= 32) ||
      code === 0x85 ||
      code === 0xa0 ||
      code === 0x1680 ||
      (code >= 0x2000 && code <= 0x200a) ||
      code === 0x2028 ||
      code === 0x2029 ||
      code === 0x202f ||
      code === 0x205f ||
      code === 0x3000
    );
  }

  function strip(text) {
    var start = 0;
    var end = text.length;
    while (start < end && isBlank(text.charCodeAt(start))) start++;
    while (end > start && isBlank(text.charCodeAt(end - 1))) end--;
    return text.slice(start, end);
  }

  function envText(env, name) {
    var raw = env[name];
    return typeof raw === "string" ? raw : "";
  }

  function envInt(env, name, min) {
    var raw = strip(envText(env, name)).split("_").join("");
    if (!/^[0-9]{1,9}$/.test(raw)) return null;
    var n = parseInt(raw, 10);
    return n >= min ? n : null;
  }

  function envNames(raw) {
    var out = [];
    var parts = raw.split(",");
    for (var i = 0; i < parts.length; i++) {
      var name = strip(parts[i]);
      if (name !== "") out.push(name);
    }
    return out;
  }

  function isTrue(raw) {
    return TRUE_WORDS.indexOf(strip(raw).toLowerCase()) >= 0;
  }

  // CLAUDE_CTX_CLEAR_POLICY: "paid" or "fixed", else the default (twin: policy_from_env).
  function policyFrom(env) {
    var policy = strip(envText(env, "CLAUDE_CTX_CLEAR_POLICY")).toLowerCase();
    return policy === "fixed" || policy === "paid" ? policy : DEFAULT_POLICY;
  }

  function isFixed(env) {
    return policyFrom(env) === "fixed";
  }

  // TRIGGER when unset or invalid: the fixed rule's 50000, the paid policy's 30000 (twin:
  // default_trigger).
  function defaultTrigger(env) {
    return isFixed(env) ? DEFAULT_TRIGGER : DEFAULT_PAID_TRIGGER;
  }

  // KEEP when unset or invalid: the fixed rule's 3, the paid policy's 1 (twin: default_keep).
  function defaultKeep(env) {
    return isFixed(env) ? DEFAULT_KEEP : DEFAULT_PAID_KEEP;
  }

  // The edit the settings ask for, or null when disabled (twin: knobs_from_env).
  function editFromEnv(env) {
    if (isTrue(envText(env, "CLAUDE_CTX_CLEAR_DISABLE"))) return null;
    var trigger = envInt(env, "CLAUDE_CTX_CLEAR_TRIGGER", 1);
    var keep = envInt(env, "CLAUDE_CTX_CLEAR_KEEP", 0);
    var atLeast = envInt(env, "CLAUDE_CTX_CLEAR_AT_LEAST", 0);
    if (atLeast === null) atLeast = DEFAULT_AT_LEAST;
    var exclude = envNames(envText(env, "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS"));
    var rawInputs = strip(envText(env, "CLAUDE_CTX_CLEAR_TOOL_INPUTS"));
    var lowered = rawInputs.toLowerCase();
    var inputs = DEFAULT_TOOL_INPUTS;
    if (lowered === "1" || lowered === "true") inputs = true;
    else if (lowered === "0" || lowered === "false") inputs = false;
    else {
      var names = envNames(rawInputs);
      if (names.length > 0) inputs = names;
    }
    var edit = {
      type: CLEAR_TOOL_USES,
      trigger: { type: "input_tokens", value: trigger === null ? defaultTrigger(env) : trigger },
      keep: { type: "tool_uses", value: keep === null ? defaultKeep(env) : keep },
    };
    if (atLeast > 0) edit.clear_at_least = { type: "input_tokens", value: atLeast };
    if (exclude.length > 0) edit.exclude_tools = exclude;
    edit.clear_tool_inputs = inputs;
    return edit;
  }

  function blocksOf(message) {
    return isObject(message) && Array.isArray(message.content) ? message.content : [];
  }

  function countType(blocks, type) {
    var n = 0;
    for (var i = 0; i < blocks.length; i++) if (isObject(blocks[i]) && blocks[i].type === type) n++;
    return n;
  }

  // The keep sent with these messages (twin: edit_for_request). With n tool uses the
  // cleared part is c = floor((n - keep) / step) * step uses, so it moves every STEP
  // uses; and the results of the round in progress (after the last assistant
  // message) are always kept: the model has not read them yet.
  function keepFor(messages, keep, step) {
    if (!Array.isArray(messages)) return keep;
    var n = 0;
    for (var i = 0; i < messages.length; i++) {
      if (isObject(messages[i]) && messages[i].role === "assistant") {
        n += countType(blocksOf(messages[i]), "tool_use");
      }
    }
    if (step > 1 && n > keep) keep = n - Math.floor((n - keep) / step) * step;
    var trailing = 0;
    for (var j = messages.length - 1; j >= 0; j--) {
      if (isObject(messages[j]) && messages[j].role === "assistant") break;
      trailing += countType(blocksOf(messages[j]), "tool_result");
    }
    return Math.max(keep, trailing);
  }

  // --- the "paid" policy (twin: engine/policy.py paid_boundary; docs/oracle.md) ---------
  // A move of the cleared part rewrites the prompt cache after the system prompt's breakpoint
  // (the API finds no other entry before the change): the messages kept and the system blocks
  // after the last cache_control (uncachedSystem): 1.25x written instead of 0.1x read, an
  // extra 1.15 x (kept - freed + rest); 2.0x, an extra 1.9x, when the request caches for an
  // hour (writeExtra). It pays once the part it frees has been read
  // enough times: the policy moves when the reads the clearable part cost since the last
  // move reach that price (2 x rent x 100 >= 23 (or 38) x PATIENCE x (kept - free + rest), integers), or
  // when the messages kept reach CEILING tokens (4 characters each). Stateless: replayed over
  // the request points of the list (a user message followed by an assistant one, and the
  // end). Sizes are characters, walked without JSON.stringify (which would cost ~10 ms on a
  // 200-message list): a string its length, a number / boolean / null 1, an object its keys'
  // lengths and its values, 10 levels deep at most; an image or document 8000.
  var MEDIA_CHARS = 8000;

  function valueSize(value, depth) {
    if (typeof value === "string") return value.length;
    if (value === null || typeof value !== "object") return 1;
    if (depth >= 10) return 0;
    var sum = 0;
    var i;
    if (Array.isArray(value)) {
      for (i = 0; i < value.length; i++) sum += valueSize(value[i], depth + 1);
      return sum;
    }
    var keys = Object.keys(value);
    for (i = 0; i < keys.length; i++) sum += keys[i].length + valueSize(value[keys[i]], depth + 1);
    return sum;
  }

  function blockType(block) {
    return isObject(block) ? block.type : undefined;
  }

  function resultSize(content) {
    if (typeof content === "string") return content.length;
    if (!Array.isArray(content)) return 0;
    var sum = 0;
    for (var i = 0; i < content.length; i++) {
      var type = blockType(content[i]);
      if (type === "text") sum += typeof content[i].text === "string" ? content[i].text.length : 0;
      else if (type === "image" || type === "document") sum += MEDIA_CHARS;
    }
    return sum;
  }

  // A thinking block's characters: its text; where the text is omitted (thinking display
  // "omitted": an empty string and the signature), 3 per 4 characters of its signature, the
  // base64 of the encrypted thinking the API counts in later prompts (twin: thinking_size).
  function thinkingSize(block) {
    var shown = typeof block.thinking === "string" ? block.thinking.length : 0;
    if (shown > 0 || typeof block.signature !== "string") return shown;
    return Math.floor((3 * block.signature.length) / 4);
  }

  function blockSize(block) {
    switch (blockType(block)) {
      case "text":
        return typeof block.text === "string" ? block.text.length : 0;
      case "thinking":
        return thinkingSize(block);
      case "image":
      case "document":
        return MEDIA_CHARS;
      case "tool_result":
        return resultSize(block.content);
      default:
        return valueSize(block, 0);
    }
  }

  function contentSize(content) {
    if (typeof content === "string") return content.length;
    if (!Array.isArray(content)) return 0;
    var sum = 0;
    for (var i = 0; i < content.length; i++) sum += blockSize(content[i]);
    return sum;
  }

  // Characters of the system prompt after its last cache_control block (a string, or blocks
  // none of which is marked: all of it; twin: uncached_system).
  function uncachedSystem(system) {
    if (typeof system === "string") return system.length;
    if (!Array.isArray(system)) return 0;
    var start = 0;
    var i;
    for (i = 0; i < system.length; i++) {
      var mark = isObject(system[i]) ? system[i].cache_control : undefined;
      if (isObject(mark) && !Array.isArray(mark)) start = i + 1;
    }
    var sum = 0;
    for (i = start; i < system.length; i++) sum += blockSize(system[i]);
    return sum;
  }

  // 20 x the extra price of a cache write over a read: 20 x (1.25 - 0.1) = 23, or 20 x (2.0 -
  // 0.1) = 38 when a system block's cache_control asks for the 1-hour cache (Claude Code marks
  // every breakpoint alike) (twin: write_extra, WRITE_EXTRA_X20, WRITE_EXTRA_X20_1H).
  var WRITE_EXTRA_X20 = 23;
  var WRITE_EXTRA_X20_1H = 38;
  function writeExtra(system) {
    if (!Array.isArray(system)) return WRITE_EXTRA_X20;
    for (var i = 0; i < system.length; i++) {
      var mark = isObject(system[i]) ? system[i].cache_control : undefined;
      if (isObject(mark) && !Array.isArray(mark) && mark.ttl === "1h") return WRITE_EXTRA_X20_1H;
    }
    return WRITE_EXTRA_X20;
  }

  function clearsInput(edit, name) {
    var ci = edit.clear_tool_inputs;
    return ci === true || (Array.isArray(ci) && ci.indexOf(name) >= 0);
  }

  function roleOf(message) {
    return isObject(message) ? message.role : undefined;
  }

  // How many of the oldest tool uses the paid policy clears with these messages. prints: null,
  // or {roles: [], sizes: []} to fill with the messages' fingerprint (the free move's). moved:
  // null, or [index of a message, boundary]: the conversation's memory moved the cleared part
  // there on the request whose list ended with that message (a free or near move); the walk
  // takes it as its own move after that message's decision (the boundary if higher, the rent
  // restarted), so that it does not pay for a second move soon after (twin: paid_boundary).
  function paidBoundary(messages, edit, ceiling, patience, rest, extra, prints, moved) {
    var results = {};
    var i, j, blocks;
    for (i = 0; i < messages.length; i++) {
      if (roleOf(messages[i]) !== "user") continue;
      blocks = blocksOf(messages[i]);
      for (j = 0; j < blocks.length; j++) {
        if (blockType(blocks[j]) === "tool_result") results["k" + blocks[j].tool_use_id] = blocks[j];
      }
    }
    var exclude = Array.isArray(edit.exclude_tools) ? edit.exclude_tools : [];
    var keep = edit.keep.value;
    var gains = [0];
    var total = 0;
    var trailing = 0;
    var cleared = 0;
    var rent = 0;
    var last = messages.length - 1;
    var following = new Array(messages.length);
    var next;
    for (i = last; i >= 0; i--) {
      following[i] = next;
      var r = roleOf(messages[i]);
      if (r === "user" || r === "assistant") next = r;
    }
    for (i = 0; i < messages.length; i++) {
      var role = roleOf(messages[i]);
      var size = 0;
      if (role === "user" || role === "assistant") {
        size = contentSize(messages[i].content);
        total += size;
      } else if (prints !== null && isObject(messages[i])) {
        size = contentSize(messages[i].content);
      }
      if (prints !== null) {
        prints.roles.push(roleKey(role));
        prints.sizes.push(size - markSize(messages[i]));
      }
      if (role === "assistant") {
        trailing = 0;
        blocks = blocksOf(messages[i]);
        for (j = 0; j < blocks.length; j++) {
          var use = blocks[j];
          if (blockType(use) !== "tool_use") continue;
          var gain = 0;
          if (exclude.indexOf(use.name) < 0) {
            var result = results["k" + use.id];
            if (isObject(result)) gain += resultSize(result.content);
            if (clearsInput(edit, use.name)) gain += valueSize(use.input, 1);
          }
          gains.push(gains[gains.length - 1] + gain);
        }
      } else {
        if (role === "user") trailing += countType(blocksOf(messages[i]), "tool_result");
        if (i === last || (role === "user" && following[i] === "assistant")) {
          // a request point: the list up to here was (or is) sent
          var limit = gains.length - 1 - Math.max(keep, trailing);
          if (limit > cleared) {
            var free = gains[limit] - gains[cleared];
            var kept = total - gains[cleared];
            rent += free;
            if (
              (kept >= 4 * ceiling && CEILING_SHARE * free >= 4 * ceiling) ||
              2 * rent * 100 >= extra * patience * (kept - free + rest)
            ) {
              cleared = limit;
              rent = 0;
            }
          }
        }
      }
      if (moved !== null && i === moved[0] && moved[1] > cleared) {
        cleared = moved[1]; // the memory's move there, taken as the walk's own
        rent = 0;
      }
    }
    if (prints !== null) prints.gains = gains; // what a near move would free (freeCleared)
    return cleared;
  }

  // --- the free move (twin: engine/twins/free_moves.py) --------------------------------------
  // The paid rule sees one list at a time, so it cannot know that a request rewrites the prompt
  // cache anyway: the text prune rewrote an older message, a micro-compaction emptied an old
  // tool result, the user rewound. A move there costs nothing extra. So the policy remembers, per
  // conversation, the last request's fingerprint (each message's role and size: contentSize
  // without a cache_control entry, which Claude Code moves to the newest messages on every
  // request; text, thinking, media and tool_result blocks never count it) and the boundary the
  // last free move set. A request BROKE the cache when its list starts with the same message as
  // the previous one and is shorter, or differs before the previous last message; then, when the
  // edit may clear more (all but KEEP and the round in progress) than the paid rule and the last
  // free move, it clears all it may, and holds that boundary until the list holds fewer tool uses
  // (a compaction). A conversation is told by Claude Code's session id and its first message
  // (role, size, its first 64 characters of text); the 16 most recently used are remembered.
  // Integers and equality only. Off with CLAUDE_CTX_CLEAR_FREE=0.
  //
  // The near move (twin: near_level, is_near): the conversation also remembers the prompt tokens
  // the reply to its last request reported (input + cache write + cache read, from message_start
  // or a JSON reply; the entry is carried from the request to watch() and its reply reader, an
  // entry evicted meanwhile is left alone). The next request reads it once (and forgets it):
  // when it reached the level, the window (1,000,000 for a "[1m]" model or a "context-1m" beta,
  // else 200,000) less Claude Code's reserve (RESERVE, 33000) less CLAUDE_CTX_CLEAR_MARGIN, a
  // list that GREW moves as a BROKE one does: Claude Code would soon compact, which rewrites the
  // cache anyway. Unlike a free move it must free at least MARGIN tokens of 4 characters
  // (nearNeed; paidBoundary's prefix sums of what clearing the oldest uses frees, prints.gains)
  // beyond what the edit clears without it: a move for a result or two rewrote the whole prompt
  // on every request past the level and only put the compaction off by as many. A new
  // conversation never moves.
  //
  // The expiry move (twin: is_expired, lifetime_ms): the conversation also remembers the time
  // of its last request (Date.now(), read once per request; every request of the conversation
  // sets it, a new one too). A request that comes more than the prompt cache's lifetime after
  // it (EXPIRY_5M_MS, or EXPIRY_1H_MS where the system prompt's breakpoints say ttl "1h", as
  // writeExtra tells) plus EXPIRY_SLACK_MS (the request's way to the API) finds nothing cached:
  // it writes its whole prompt whatever the edit says, so a list that GREW moves as a BROKE one
  // does. Another conversation's requests never refresh this one's time.
  //
  // The paid walk takes the memory's last move as its own (twin: Conversation.paid_move): the
  // entry keeps moved = [index of the last message of the request moved on, boundary] while the
  // boundary is held, and the walk of a later list of the same conversation (not NEW, not below
  // the boundary) takes that boundary there and restarts its rent, so that the paid rule does
  // not pay for a second move soon after one it did not make.
  var MARK_LEN = 13; // "cache_control".length
  // a role that is not a string, number, boolean or null: one value for all (a constant kept
  // across calls, which an object made per call would not be; JSON has no Infinity)
  var OTHER_ROLE = Infinity;
  var CONVERSATIONS = 16;
  var NEW = 0;
  var GREW = 1;
  var BROKE = 2;
  var DEFAULT_MARGIN = 10000; // twin: free_moves.DEFAULT_MARGIN
  var WINDOW = 200000;
  var WINDOW_1M = 1000000;
  var EXPIRY_5M_MS = 300000; // twin: free_moves.EXPIRY_5M_MS, the 5-minute cache's lifetime
  var EXPIRY_1H_MS = 3600000; // twin: EXPIRY_1H_MS, the 1-hour cache's
  var EXPIRY_SLACK_MS = 10000; // twin: EXPIRY_SLACK_MS

  // The cache lifetime (ms) of a request whose writeExtra is extra (twin: lifetime_ms).
  function lifetimeMs(extra) {
    return extra === WRITE_EXTRA_X20_1H ? EXPIRY_1H_MS : EXPIRY_5M_MS;
  }

  function freeOn(env) {
    var raw = strip(envText(env, "CLAUDE_CTX_CLEAR_FREE")).toLowerCase();
    return raw !== "0" && raw !== "false" && raw !== "no" && raw !== "off";
  }

  // CLAUDE_CTX_CLEAR_MARGIN (twin: margin_from_env).
  function marginFromEnv(env) {
    var margin = envInt(env, "CLAUDE_CTX_CLEAR_MARGIN", 0);
    return margin === null ? DEFAULT_MARGIN : margin;
  }

  // Claude Code's auto-compact threshold as a request shows it: its window (1M for a [1m]
  // model or a context-1m beta) less RESERVE (twin: window_threshold).
  function windowThreshold(model, betas) {
    var oneM = String(model).indexOf("[1m]") >= 0;
    if (Array.isArray(betas)) {
      for (var i = 0; i < betas.length && !oneM; i++) oneM = String(betas[i]).indexOf("context-1m") >= 0;
    }
    return (oneM ? WINDOW_1M : WINDOW) - RESERVE;
  }

  // The characters a near move must free: MARGIN tokens of 4 (twin: near_need).
  function nearNeed(margin) {
    return margin > 0 ? 4 * margin : 0;
  }

  // The prompt from which a reply makes the next request a near move; 0: never (twin: near_level).
  function nearLevel(model, betas, margin) {
    if (margin <= 0) return 0;
    return windowThreshold(model, betas) - margin;
  }

  // CEILING when unset or invalid: DEFAULT_CEILING scaled to the request's threshold, rounded
  // half up (twin: ceiling_from_env). At a 1M window 90000 would make every request past it a
  // move, each a rewrite of the whole prompt, for a compaction that is not coming.
  function defaultCeiling(model, betas) {
    var t = windowThreshold(model, betas);
    return Math.max(1, Math.floor((2 * DEFAULT_CEILING * t + CEILING_THRESHOLD) / (2 * CEILING_THRESHOLD)));
  }

  // A role as Python compares it: null for none, a boolean as its number (True == 1).
  function roleKey(role) {
    if (role === undefined || role === null) return null;
    if (typeof role === "string" || typeof role === "number") return role;
    if (typeof role === "boolean") return role ? 1 : 0;
    return OTHER_ROLE;
  }

  // What the cache_control entries of a message's blocks add to its contentSize.
  function markSize(message) {
    var blocks = blocksOf(message);
    var sum = 0;
    for (var i = 0; i < blocks.length; i++) {
      var b = blocks[i];
      if (!isObject(b)) continue;
      var t = b.type;
      if (t === "text" || t === "tool_result" || t === "thinking" || t === "image") continue;
      if (t === "document" || !Object.prototype.hasOwnProperty.call(b, "cache_control")) continue;
      sum += MARK_LEN + valueSize(b.cache_control, 1);
    }
    return sum;
  }

  // How a list follows the conversation's previous one (twin: change).
  function change(conv, prints) {
    var roles = prints.roles;
    var sizes = prints.sizes;
    var was = conv.roles;
    var n = was.length;
    if (n === 0 || roles.length === 0 || roles[0] !== was[0] || sizes[0] !== conv.sizes[0]) {
      return NEW;
    }
    if (roles.length < n) return BROKE;
    for (var i = 0; i < n - 1; i++) {
      if (roles[i] !== was[i] || sizes[i] !== conv.sizes[i]) return BROKE;
    }
    return GREW;
  }

  // The first message's fingerprint ({role, size}: what the walk puts first in prints; both
  // undefined for an empty list).
  function headPrint(messages) {
    if (messages.length === 0) return { role: undefined, size: undefined };
    var m = messages[0];
    return { role: roleKey(roleOf(m)), size: (isObject(m) ? contentSize(m.content) : 0) - markSize(m) };
  }

  // The conversation of these messages (created, or moved to the most recent end). head: their
  // headPrint.
  function conversationOf(mem, session, messages, head) {
    var first = messages[0];
    var text = "";
    var content = isObject(first) ? first.content : undefined;
    if (typeof content === "string") text = content;
    else if (Array.isArray(content)) {
      for (var j = 0; j < content.length; j++) {
        if (blockType(content[j]) === "text") {
          if (typeof content[j].text === "string") text = content[j].text;
          break;
        }
      }
    }
    var role = head.role;
    var key = [
      typeof session === "string" ? session : "",
      role === OTHER_ROLE ? "\u0001" : String(role),
      String(head.size),
      text.slice(0, 64),
    ].join("\u0000");
    if (!Array.isArray(mem.conversations)) mem.conversations = [];
    var list = mem.conversations;
    var conv = null;
    for (var i = 0; i < list.length; i++) {
      if (list[i].key === key) {
        conv = list.splice(i, 1)[0];
        break;
      }
    }
    if (conv === null) {
      conv = { key: key, roles: [], sizes: [], forced: 0, prompt: null, moved: null, at: null };
    }
    list.push(conv);
    while (list.length > CONVERSATIONS) list.shift();
    return conv;
  }

  // Tool uses the edit clears (twin: Conversation.keep, free_step): the paid rule's, or more
  // after a free, near or expiry move. limit: what it may clear; paid: what the paid rule clears;
  // level: nearLevel's (the remembered prompt is read once, here); now: the request's time (ms;
  // not a number: unknown, no expiry move and the time remembered stays); lifetime: lifetimeMs's;
  // need: nearNeed's (weighed on prints.gains, paidBoundary's).
  function freeCleared(conv, prints, uses, limit, paid, level, now, lifetime, need) {
    var how = change(conv, prints);
    var near = level > 0 && typeof conv.prompt === "number" && conv.prompt >= level;
    var expired = false;
    if (typeof now === "number" && isFinite(now)) {
      expired = typeof conv.at === "number" && now - conv.at > lifetime + EXPIRY_SLACK_MS;
      conv.at = now;
    }
    conv.prompt = null;
    conv.roles = prints.roles;
    conv.sizes = prints.sizes;
    if (how === NEW || uses < conv.forced) conv.forced = 0;
    var base = Math.max(paid, conv.forced);
    if (near && need > 0) {
      var gains = prints.gains;
      near = Array.isArray(gains) && limit < gains.length && gains[limit] - gains[base] >= need;
    }
    if ((how === BROKE || ((near || expired) && how === GREW)) && limit > base) {
      conv.forced = limit;
      conv.moved = [prints.roles.length - 1, limit]; // for the walk of the next requests
    } else if (conv.forced === 0) conv.moved = null;
    return Math.max(paid, Math.min(conv.forced, limit));
  }

  // The conversation's last move for the walk of this list (twin: Conversation.paid_move): none
  // for another conversation (change() would say NEW: only the first message tells) or a list
  // below the boundary held.
  function paidMove(conv, head, uses) {
    var n = conv.roles.length;
    if (n === 0 || head.role === undefined || head.role !== conv.roles[0]) return null;
    if (head.size !== conv.sizes[0] || uses < conv.forced) return null;
    return conv.moved;
  }

  // The reply to a request of conv reported this usage: its prompt tokens (input, cache write,
  // cache read), remembered unless conv was evicted meanwhile (twin: Conversation.observe).
  function notePrompt(conv, u) {
    if (!isObject(u)) return;
    var parts = [u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens];
    var prompt = 0;
    var seen = false;
    for (var i = 0; i < parts.length; i++) {
      var v = count(parts[i]);
      if (v !== null) {
        prompt += v;
        seen = true;
      }
    }
    if (seen && memory().conversations.indexOf(conv) >= 0) conv.prompt = prompt;
  }

  // Process-wide memory: models the API refused the edit for, the last model sent, the
  // conversations of the free move, the one whose reply the next watch() reads for its prompt.
  function memory() {
    var self = _ctxpatchContextClearing;
    if (!isObject(self.memory)) {
      self.memory = {
        refused: {},
        sent: {},
        lastModel: null,
        decision: null,
        conversations: [],
        replyConv: null,
        log: { busy: false, queue: [], fs: null, opening: null, hooked: false, open: [] },
      };
    }
    return self.memory;
  }

  // The debug log and the ledger: lines are queued and appended in order by one asynchronous
  // writer, so a request never waits for the disk, and a FIFO nobody reads is given up at once.
  // A ledger line (dir set) creates its directory (700) and rotates its file when it is full.
  function debug(env, entry) {
    try {
      var file = envText(env, "CLAUDE_CTX_CLEAR_DEBUG") || envText(env, "CLAUDE_TEXT_PRUNE_DEBUG");
      if (file === "") return;
      entry.event = "ctxpatch.contextClearing";
      entry.time = new Date().toISOString();
      append({ file: file, line: JSON.stringify(entry) + "\n", dir: null });
    } catch (e) {
      // the debug log must never break a request
    }
  }

  function append(item) {
    var log = memory().log;
    log.queue.push(item);
    hook(log);
    if (!log.busy) {
      log.busy = true;
      loadFs(function (fs) {
        flush(fs, log);
      }, log);
    }
  }

  // Claude Code ends with process.exit(), after which no callback runs: what is still queued
  // then is written synchronously (the process is ending: nothing waits on it).
  function hook(log) {
    if (log.hooked) return;
    log.hooked = true;
    process.once("exit", function () {
      try {
        drain(log);
      } catch (e) {
        // the lines are lost, never the exit
      }
    });
  }

  function loadFs(use, log) {
    var fail = function () {
      log.queue = [];
      log.busy = false;
    };
    var got = function (fs) {
      log.fs = fs;
      use(fs);
    };
    if (log.fs) {
      use(log.fs);
    } else if (typeof process.getBuiltinModule === "function") {
      got(process.getBuiltinModule("fs"));
    } else {
      // Node 18-20.15 in an ES module: no require and no getBuiltinModule.
      new Function("s", "return import(s)")("fs").then(got, fail);
    }
  }

  // At exit: the replies still being read (what was read; cut without their message_delta),
  // the batch being opened and the queue, one synchronous write per file.
  function drain(log) {
    var fs = log.fs;
    if (!fs) return;
    var open = log.open.slice();
    for (var j = 0; j < open.length; j++) finish(open[j]);
    var c = fs.constants || {};
    var flags = c.O_WRONLY | c.O_APPEND | c.O_CREAT | (c.O_NONBLOCK || 0);
    var batches = log.opening ? [log.opening] : [];
    log.opening = null;
    while (log.queue.length > 0) batches.push(batch(log));
    for (var i = 0; i < batches.length; i++) {
      try {
        writeNow(fs, flags, batches[i]);
      } catch (e) {
        // this file cannot be written: the next one may
      }
    }
  }

  function writeNow(fs, flags, b) {
    if (b.dir !== null) {
      fs.mkdirSync(b.dir, { recursive: true, mode: 448 });
      var size = -1;
      try {
        size = fs.statSync(b.file).size;
      } catch (e) {
        // no file yet
      }
      if (size >= 0 && size + b.lines.length > LEDGER_MAX_BYTES) {
        for (var k = LEDGER_KEEP; k >= 1; k--) {
          try {
            fs.renameSync(rotatedFrom(b.dir, k), b.dir + "/ledger." + k + ".jsonl");
          } catch (e) {
            // nothing to shift
          }
        }
      }
    }
    var fd = fs.openSync(b.file, flags, 384);
    try {
      if (b.dir !== null && fs.fstatSync(fd).mode & 63) fs.fchmodSync(fd, 384);
      fs.writeSync(fd, b.lines);
    } finally {
      fs.closeSync(fd);
    }
  }

  function rotatedFrom(dir, k) {
    return dir + "/" + (k === 1 ? "ledger.jsonl" : "ledger." + (k - 1) + ".jsonl");
  }

  // The first queued line and those after it for the same file.
  function batch(log) {
    var file = log.queue[0].file;
    var dir = log.queue[0].dir;
    var lines = "";
    while (log.queue.length > 0 && log.queue[0].file === file) lines += log.queue.shift().line;
    return { file: file, dir: dir, lines: lines };
  }

  function flush(fs, log) {
    var next = function () {
      try {
        flush(fs, log);
      } catch (e) {
        log.queue = [];
        log.busy = false;
      }
    };
    if (log.queue.length === 0) {
      log.busy = false;
      return;
    }
    var b = batch(log);
    var file = b.file;
    var dir = b.dir;
    var lines = b.lines;
    var c = fs.constants || {};
    // O_NONBLOCK: opening a FIFO that nobody reads fails at once instead of waiting.
    var flags = c.O_WRONLY | c.O_APPEND | c.O_CREAT | (c.O_NONBLOCK || 0);
    // until its write is issued, the batch is the exit's to write (drain)
    log.opening = b;
    var write = function (fd) {
      if (log.opening !== b) return fs.close(fd, next); // written at exit already
      log.opening = null;
      fs.write(fd, lines, function () {
        fs.close(fd, next);
      });
    };
    var open = function (again) {
      fs.open(file, flags, 384, function (err, fd) {
        if (err) {
          if (dir === null || again || err.code !== "ENOENT") {
            if (log.opening === b) log.opening = null;
            return next();
          }
          return fs.mkdir(dir, { recursive: true, mode: 448 }, function () {
            open(true);
          });
        }
        if (dir === null) return write(fd);
        fs.fstat(fd, function (err2, st) {
          if (err2) {
            if (log.opening === b) log.opening = null;
            return fs.close(fd, next);
          }
          // ASCII lines (numbers, ids, fixed texts): characters are bytes
          if (again || st.size + lines.length <= LEDGER_MAX_BYTES) {
            if (!(st.mode & 63)) return write(fd);
            return fs.fchmod(fd, 384, function () {
              write(fd);
            });
          }
          fs.close(fd, function () {
            rotate(fs, dir, LEDGER_KEEP, function () {
              open(true);
            });
          });
        });
      });
    };
    try {
      open(false);
    } catch (e) {
      log.queue = [];
      log.busy = false;
    }
  }

  // ledger.jsonl -> ledger.1.jsonl -> ... -> ledger.KEEP.jsonl (the oldest one goes).
  function rotate(fs, dir, k, done) {
    if (k < 1) return done();
    fs.rename(rotatedFrom(dir, k), dir + "/ledger." + k + ".jsonl", function () {
      rotate(fs, dir, k - 1, done);
    });
  }

  // Near the window (only with CLAUDE_CTX_CLEAR_WINDOW_GUARD=1: the API documents context editing
  // as what keeps a conversation within the window, so by default the edited prompt is what must
  // fit; the guard is for the cautious reading, where the window is measured before clearing).
  // With clearing, Claude Code's count follows the edited usage, so its own
  // auto-compaction stops firing while the prompt it sends grows; past the model's window the
  // API may refuse the prompt as sent ("prompt is too long"), and Claude Code <= 2.1.113 never
  // recovers from that (measured: tests/e2e/test_over_window.py). So once the request's JSON
  // may hold as many tokens as Claude Code's auto-compact threshold (the window less 20000
  // reserved output and 13000 buffer), at 3 characters a token (JSON of English and code runs
  // 3.5 to 4.5: the guard errs early), the edit is left out: that request reports the whole
  // prompt and Claude Code compacts before the next one, inside the window. Twin:
  // gateway/window.py (the gateway's, on the body's bytes).
  var CHARS_PER_TOKEN = 3;
  var RESERVE = 20000 + 13000;

  function nearWindow(request) {
    var oneM = /\[1m\]/.test(String(request.model));
    var betas = Array.isArray(request.betas) ? request.betas : [];
    for (var i = 0; i < betas.length; i++) {
      if (/context-1m/.test(String(betas[i]))) oneM = true;
    }
    var limit = ((oneM ? 1000000 : 200000) - RESERVE) * CHARS_PER_TOKEN;
    var size = 0;
    var parts = [request.messages, request.system, request.tools];
    for (var k = 0; k < parts.length; k++) {
      if (parts[k] !== undefined) size += JSON.stringify(parts[k]).length;
    }
    return size >= limit;
  }

  function skipReason(env, request) {
    var providers = ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"];
    for (var i = 0; i < providers.length; i++) {
      if (isTrue(envText(env, providers[i]))) return providers[i] + " is set";
    }
    var model = request.model;
    if (typeof model !== "string" || model === "") return "the request names no model";
    if (/claude-3/.test(model)) return "Claude 3 models do not support context editing";
    if (/^arn:|(^|\.)anthropic\./.test(model)) return "a Bedrock model id";
    if (memory().refused[model]) return "the API refused the edit for this model earlier";
    if (!Array.isArray(request.betas)) return "the request carries no betas list";
    var cm = request.context_management;
    if (cm !== undefined && cm !== null && !(isObject(cm) && Array.isArray(cm.edits))) {
      return "context_management has a form ctxpatch does not know";
    }
    if (env.CLAUDE_CTX_CLEAR_WINDOW_GUARD === "1" && nearWindow(request)) {
      return "the prompt nears the auto-compact threshold: Claude Code compacts instead";
    }
    return null;
  }

  function withClearing(request) {
    if (!isObject(request) || typeof process === "undefined" || !isObject(process.env)) {
      return request;
    }
    var env = process.env;
    var mem = memory();
    mem.decision = null;
    mem.replyConv = null;
    if (ledgerOn(env)) {
      mem.decision = decision(request);
      hook(mem.log);
      if (!mem.log.fs && !mem.log.busy) {
        // ready for the exit's synchronous write (an ES module on Node < 20.16 imports it)
        mem.log.busy = true;
        loadFs(function (fs) {
          flush(fs, mem.log);
        }, mem.log);
      }
    }
    var edit = editFromEnv(env);
    if (edit === null) return skipped(mem, request, "CLAUDE_CTX_CLEAR_DISABLE is set");
    var keep;
    if (!isFixed(env) && Array.isArray(request.messages)) {
      var ceiling = envInt(env, "CLAUDE_CTX_CLEAR_CEILING", 1);
      var patience = envInt(env, "CLAUDE_CTX_CLEAR_PATIENCE", 0);
      var messages = request.messages;
      var prints = freeOn(env) ? { roles: [], sizes: [] } : null;
      var uses = 0;
      for (var k = 0; k < messages.length; k++) {
        if (roleOf(messages[k]) === "assistant") uses += countType(blocksOf(messages[k]), "tool_use");
      }
      var conv = null;
      var moved = null;
      if (prints !== null) {
        try {
          var session = mem.decision !== null ? mem.decision.session : sessionOf(request);
          var head = headPrint(messages);
          conv = conversationOf(mem, session, messages, head);
          moved = paidMove(conv, head, uses);
        } catch (e) {
          conv = null; // the paid rule alone: the memory never breaks a request
          moved = null;
        }
      }
      var extra = writeExtra(request.system);
      if (ceiling === null) {
        try {
          ceiling = defaultCeiling(request.model, request.betas);
        } catch (e) {
          ceiling = DEFAULT_CEILING; // a model no string can be made of: never a broken request
        }
      }
      var cleared = paidBoundary(
        messages,
        edit,
        ceiling,
        patience === null ? DEFAULT_PATIENCE : patience,
        uncachedSystem(request.system),
        extra,
        prints,
        moved
      );
      var least = keepFor(messages, edit.keep.value, 1); // KEEP and the round in progress
      keep = Math.max(uses - cleared, least);
      if (conv !== null) {
        try {
          var limit = Math.max(0, uses - least);
          var margin = marginFromEnv(env);
          var level = nearLevel(request.model, request.betas, margin);
          var paid = Math.max(0, uses - keep);
          var now = Date.now(); // the request's time: the expiry move's clock
          var life = lifetimeMs(extra);
          var more = freeCleared(conv, prints, uses, limit, paid, level, now, life, nearNeed(margin));
          keep = Math.max(uses - more, least);
          if (level > 0) mem.replyConv = conv; // its reply's prompt: for the next request
        } catch (e) {
          // the paid rule's keep: the memory never breaks a request
        }
      }
    } else {
      var step = envInt(env, "CLAUDE_CTX_CLEAR_STEP", 1);
      keep = keepFor(request.messages, edit.keep.value, step === null ? DEFAULT_STEP : step);
    }
    if (keep !== edit.keep.value) edit.keep = { type: "tool_uses", value: keep };
    var why = skipReason(env, request);
    if (why !== null) {
      debug(env, { action: "skipped", model: String(request.model), reason: why });
      return skipped(mem, request, why);
    }
    var cm = request.context_management;
    var current = isObject(cm) ? cm.edits : [];
    var first = [];
    var rest = [];
    for (var i = 0; i < current.length; i++) {
      var type = isObject(current[i]) ? current[i].type : undefined;
      if (type === CLEAR_TOOL_USES) {
        debug(env, { action: "skipped", model: request.model, reason: "Claude Code sends its own" });
        return skipped(mem, request, "Claude Code sends its own clear_tool_uses_20250919");
      }
      if (type === CLEAR_THINKING) first.push(current[i]);
      else rest.push(current[i]);
    }
    var betas = request.betas.indexOf(BETA) >= 0 ? request.betas : request.betas.concat([BETA]);
    var out = Object.assign({}, request, {
      betas: betas,
      context_management: Object.assign({}, isObject(cm) ? cm : {}, {
        edits: first.concat(rest, [edit]),
      }),
    });
    mem.sent[request.model] = true;
    mem.lastModel = request.model;
    if (mem.decision !== null) mem.decision.edit = "added";
    debug(env, { action: "added", model: request.model, edit: edit });
    return out;
  }

  function skipped(mem, request, why) {
    if (mem.decision !== null) mem.decision.why = why;
    return request;
  }

  // --- the ledger (usage/ledger.py) ----------------------------------------------------------
  var SAFE_ID = /^[A-Za-z0-9_.:\-]{1,128}$/;
  var UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
  var OLD_SESSION = /session_([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})/;
  var SSE_MAX_LINE = 262144; // a message_start / message_delta line is far smaller
  var SSE_HEAD = 64; // their type is the first key: within this many characters of "data:"
  var USAGE_KEYS = ["input", "cache_write_5m", "cache_write_1h", "cache_read", "output"];

  function ledgerOn(env) {
    var raw = strip(envText(env, "CTXPATCH_LEDGER")).toLowerCase();
    return raw !== "0" && raw !== "false" && raw !== "no" && raw !== "off";
  }

  function safeId(value) {
    return typeof value === "string" && SAFE_ID.test(value) ? value : null;
  }

  // Claude Code's session id: metadata.user_id is JSON ({"session_id": ...}) in 2.1.x and
  // "user_<hash>_account_<uuid>_session_<uuid>" before.
  function sessionOf(request) {
    var meta = request.metadata;
    var uid = isObject(meta) ? meta.user_id : undefined;
    if (typeof uid !== "string" || uid.length > 4096) return null;
    if (uid.charAt(0) === "{") {
      try {
        var parsed = JSON.parse(uid);
        var sid = isObject(parsed) ? parsed.session_id : undefined;
        return typeof sid === "string" && UUID.test(sid) ? sid : null;
      } catch (e) {
        return null;
      }
    }
    var m = OLD_SESSION.exec(uid);
    return m ? m[1] : null;
  }

  function decision(request) {
    return { session: sessionOf(request), model: safeId(request.model), edit: "skipped", why: "" };
  }

  // <platformdirs user_state_dir("ctxpatch")>/ledger, or null where it cannot be told.
  function ledgerDir(env) {
    var base = envText(env, "XDG_STATE_HOME");
    if (base.charAt(0) !== "/") {
      var home = envText(env, "HOME");
      if (home.charAt(0) !== "/" || process.platform === "win32") return null;
      base = home + (process.platform === "darwin" ? "/Library/Application Support" : "/.local/state");
    }
    return base + (base.charAt(base.length - 1) === "/" ? "" : "/") + "ctxpatch/ledger";
  }

  function count(v) {
    return typeof v === "number" && v >= 0 && Math.floor(v) === v ? v : null;
  }

  // twin: ReplyUsage.take_usage / take_edits / take_message
  function takeUsage(rec, u) {
    if (!isObject(u)) return;
    var pairs = [
      ["input_tokens", "input"],
      ["cache_read_input_tokens", "cache_read"],
      ["output_tokens", "output"],
    ];
    for (var i = 0; i < pairs.length; i++) {
      var v = count(u[pairs[i][0]]);
      if (v !== null) rec.usage[pairs[i][1]] = v;
    }
    var split = u.cache_creation;
    var w5 = isObject(split) ? count(split.ephemeral_5m_input_tokens) : null;
    var w1 = isObject(split) ? count(split.ephemeral_1h_input_tokens) : null;
    var total = count(u.cache_creation_input_tokens);
    if (w5 !== null || w1 !== null) {
      rec.usage.cache_write_5m = w5 || 0;
      rec.usage.cache_write_1h = w1 || 0;
    } else if (total !== null) {
      rec.usage.cache_write_5m = total;
      if (rec.usage.cache_write_1h === undefined) rec.usage.cache_write_1h = 0;
    }
  }

  function takeEdits(rec, cm) {
    var edits = isObject(cm) ? cm.applied_edits : undefined;
    if (!Array.isArray(edits)) return;
    var uses = 0;
    var tokens = 0;
    for (var i = 0; i < edits.length; i++) {
      if (!isObject(edits[i])) continue;
      uses += count(edits[i].cleared_tool_uses) || 0;
      tokens += count(edits[i].cleared_input_tokens) || 0;
    }
    rec.clearedToolUses = uses;
    rec.clearedInputTokens = tokens;
  }

  function takeMessage(rec, msg) {
    if (!isObject(msg)) return;
    rec.started = true;
    if (rec.conv !== null) notePrompt(rec.conv, msg.usage);
    if (rec.dir === null) return; // the near move's reader: the prompt only
    takeUsage(rec, msg.usage);
    takeEdits(rec, msg.context_management);
  }

  function takeEvent(rec, ev) {
    if (!isObject(ev)) return;
    if (ev.type === "message_start") takeMessage(rec, ev.message);
    else if (ev.type === "message_delta") {
      rec.deltaSeen = true;
      takeUsage(rec, ev.usage);
      takeEdits(rec, ev.context_management);
    }
  }

  // One SSE line: only message_start / message_delta are parsed.
  function takeLine(rec, line) {
    if (line.slice(0, 5) !== "data:") return;
    var head = line.slice(0, SSE_HEAD);
    if (head.indexOf('"message_start"') < 0 && head.indexOf('"message_delta"') < 0) return;
    try {
      takeEvent(rec, JSON.parse(line.slice(5)));
    } catch (e) {
      // not JSON: skipped, like the gateway's tap
    }
  }

  // Text of the stream as it comes: whole lines go to takeLine; a partial line is kept up to
  // SSE_MAX_LINE characters (longer: dropped up to its end).
  function takeText(rec, text) {
    var at = 0;
    var nl;
    while ((nl = text.indexOf("\n", at)) >= 0) {
      if (rec.skip) rec.skip = false;
      else takeLine(rec, rec.partial + text.slice(at, nl));
      rec.partial = "";
      at = nl + 1;
    }
    if (at < text.length && !rec.skip) {
      rec.partial += text.slice(at);
      if (rec.partial.length > SSE_MAX_LINE) {
        rec.partial = "";
        rec.skip = true;
      }
    }
  }

  // A reply's record: the ledger's (dir: its directory), and/or the near move's (conv: the
  // conversation told the prompt; a record with dir null writes no line and is read up to
  // message_start only).
  function newRecord(dir, d, conv) {
    var rec = {
      dir: dir,
      conv: conv,
      started: false,
      t: Date.now() / 1000,
      session: d === null ? null : d.session,
      model: d === null ? null : d.model,
      edit: d === null ? "skipped" : d.edit,
      why: d === null ? "ctxpatch saw no request parameters" : d.why,
      status: null,
      requestId: null,
      usage: {},
      clearedToolUses: 0,
      clearedInputTokens: 0,
      deltaSeen: false,
      cut: false,
      unread: false,
      done: false,
      partial: "",
      skip: false,
    };
    if (dir === null) return rec;
    var open = memory().log.open;
    // a reply that never ends is not tracked for ever (it still writes its line if it ends)
    if (open.length >= 64) open.shift();
    open.push(rec);
    return rec;
  }

  function headerOf(headers, name) {
    if (!isObject(headers)) return undefined;
    if (typeof headers.get === "function") return headers.get(name);
    return headers[name];
  }

  // The line, as usage.ledger.RequestRecord.line() writes it (same keys, same order).
  function finish(rec) {
    if (rec.done) return;
    rec.done = true;
    try {
      var open = memory().log.open;
      var at = open.indexOf(rec);
      if (at >= 0) open.splice(at, 1);
      if (rec.dir !== null) ledgerLine(rec);
    } catch (e) {
      // no line: the ledger never breaks a request
    }
  }

  function ledgerLine(rec) {
    var line = {
      t: rec.t,
      src: "cli.js",
      session: rec.session,
      model: rec.model,
      status: rec.status,
      request_id: rec.requestId,
    };
    for (var i = 0; i < USAGE_KEYS.length; i++) line[USAGE_KEYS[i]] = rec.usage[USAGE_KEYS[i]] || 0;
    line.cleared_tool_uses = rec.clearedToolUses;
    line.cleared_input_tokens = rec.clearedInputTokens;
    line.edit = rec.edit;
    if (rec.why) line.why = rec.why;
    if (rec.unread) line.unread = true;
    else if (rec.cut || (rec.status === 200 && !rec.deltaSeen)) line.cut = true;
    append({ file: rec.dir + "/ledger.jsonl", line: JSON.stringify(line) + "\n", dir: rec.dir });
  }

  // An error instead of a reply (an HTTP status: the API's answer), or during one (none: cut).
  function failed(rec, err, refused) {
    try {
      var status = isObject(err) ? count(err.status !== undefined ? err.status : err.statusCode) : null;
      if (status !== null) {
        rec.status = status;
        rec.requestId = safeId(err.request_id) || safeId(headerOf(err.headers, "request-id"));
      } else {
        rec.cut = true;
      }
      if (rec.edit === "added" && refused) {
        rec.edit = "lost";
        rec.why = "the API refused the edit for this model";
      } else if (rec.edit === "added" && rec.status === null) {
        rec.edit = "lost";
        rec.why = "no reply";
      }
    } catch (e) {
      rec.cut = true;
    }
    finish(rec);
  }

  // The fetch Response of an APIPromise: SSE read from a clone (tee), a JSON reply from the
  // SDK's own parse (memoized: the body is read once).
  function readResponse(rec, pending, response) {
    rec.status = count(response.status);
    rec.requestId = safeId(headerOf(response.headers, "request-id"));
    var type = String(headerOf(response.headers, "content-type") || "").toLowerCase();
    if (type.indexOf("json") >= 0) {
      pending.then(
        function (msg) {
          takeMessage(rec, msg);
          rec.deltaSeen = true;
          finish(rec);
        },
        function () {
          rec.cut = true;
          finish(rec);
        }
      );
      return;
    }
    var body = response.clone().body;
    if (!isObject(body) || typeof body.getReader !== "function") {
      rec.unread = true;
      return finish(rec);
    }
    var reader = body.getReader();
    var decoder = new TextDecoder();
    var broke = function () {
      rec.cut = true;
      finish(rec);
    };
    var pump = function (chunk) {
      try {
        if (chunk.done) {
          takeText(rec, decoder.decode() + "\n");
          return finish(rec);
        }
        takeText(rec, decoder.decode(chunk.value, { stream: true }));
        if (rec.dir === null && rec.started) {
          // the near move's reader has its prompt: the copy is let go (the reply reads on)
          finish(rec);
          reader.cancel().then(undefined, function () {});
          return;
        }
        reader.read().then(pump, broke);
      } catch (e) {
        broke();
      }
    };
    reader.read().then(pump, broke);
  }

  // A 1.0.x MessageStream: its raw events, its Response once connected.
  function readStream(rec, stream) {
    var connected = function () {
      try {
        var response = stream.response;
        if (isObject(response)) rec.status = count(response.status);
        rec.requestId = safeId(stream.request_id);
      } catch (e) {
        // the status stays unknown
      }
    };
    stream.on("connect", connected);
    stream.on("streamEvent", function (ev) {
      try {
        takeEvent(rec, ev);
      } catch (e) {
        // a strange event: not counted
      }
    });
    stream.on("end", function () {
      connected();
      finish(rec);
    });
    stream.on("abort", function () {
      rec.cut = true;
      finish(rec);
    });
  }

  function errorText(err) {
    var parts = [];
    if (isObject(err) || typeof err === "string") {
      parts.push(String(isObject(err) ? err.message : err));
      if (isObject(err) && err.error !== undefined) {
        try {
          parts.push(JSON.stringify(err.error));
        } catch (e) {
          // a circular error body: the message alone
        }
      }
    }
    return parts.join(" ");
  }

  // True when err is the API refusing the edit (noted for the rest of the process).
  function noteRefusal(err) {
    if (!isObject(err)) return false;
    var status = err.status !== undefined ? err.status : err.statusCode;
    var text = errorText(err);
    if (status !== 400 && !/^400\b/.test(text)) return false;
    if (!/clear_tool_uses_20250919|context_management|context-management-2025-06-27/.test(text)) {
      return false;
    }
    var mem = memory();
    var named = /([^\s"'`]+) does not support the clear_tool_uses_20250919/.exec(text);
    var model = named && mem.sent[named[1]] ? named[1] : mem.lastModel;
    if (typeof model !== "string") return false;
    mem.refused[model] = true;
    if (typeof process !== "undefined" && isObject(process.env)) {
      debug(process.env, { action: "refused", model: model, message: text.slice(0, 500) });
    }
    return true;
  }

  function watch(pending) {
    var mem = memory();
    var d = mem.decision;
    var conv = mem.replyConv;
    mem.decision = null;
    mem.replyConv = null;
    var rec = null;
    var ledger = function () {
      var on = typeof process !== "undefined" && isObject(process.env) && ledgerOn(process.env);
      var dir = on ? ledgerDir(process.env) : null;
      if (dir === null && conv === null) return null;
      return newRecord(dir, d, conv);
    };
    var onError = function (err) {
      var refused = false;
      try {
        refused = noteRefusal(err);
      } catch (e) {
        // noting a refusal must never break anything
      }
      if (rec !== null) failed(rec, err, refused);
    };
    if (!isObject(pending) && typeof pending !== "function") return pending;
    if (typeof pending.asResponse === "function") {
      // The SDK's APIPromise: its fetch Response, read from a clone.
      rec = ledger();
      var response = pending.asResponse();
      if (isObject(response) && typeof response.then === "function") {
        response.then(function (r) {
          if (rec === null) return;
          try {
            readResponse(rec, pending, r);
          } catch (e) {
            rec.unread = true;
            finish(rec);
          }
        }, onError);
      }
    } else if (typeof pending.then === "function") {
      pending.then(undefined, onError);
    } else if (typeof pending.on === "function") {
      // The SDK's MessageStream (Claude Code 1.0.x streams with .stream()).
      rec = ledger();
      pending.on("error", onError);
      if (rec !== null) readStream(rec, pending);
    }
    return pending;
  }

  try {
    return mode === "watch" ? watch(value) : withClearing(value);
  } catch (e) {
    return value;
  }
}
