// memaudit report: one user's drill-down (grid, target, episodes, final memory), rendered from the
// user's data file (data/<bench>/<user>.js, written by memaudit/report/userdata.py). The fragment
// says what to show: f = data file, v = grid | target | episodes | memory, d = dimension, r = run,
// a = element to scroll to. No network: the data file is loaded as a script, so this works from disk.
// The same script renders a page listing targets (window.MEMAUDIT.list), linking into the user views.
// Extension point: push a function (user, params) -> HTML onto MEMAUDIT.sections[view] to add a
// section at the end of that view (other report parts plug in there).
"use strict";
(function () {
  const C = window.MEMAUDIT;
  C.sections = C.sections || {};
  const cache = {};
  let waiting = null;

  const esc = (v) => String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g,
    (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);
  const num = (v, d = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
  const canon = (v) => JSON.stringify(sortKeys(v));
  function sortKeys(v) {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v && typeof v === "object") {
      const out = {};
      for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k]);
      return out;
    }
    return v;
  }
  function scoreClass(s) {
    if (s === null || s === undefined) return "snone";
    const reached = C.levels.find(([level]) => s >= level - 1e-9);  // the rubric's levels, best first
    return (reached || C.levels[C.levels.length - 1])[1];
  }
  const params = () => new URLSearchParams(location.hash.slice(1));
  function to(p, extra) {
    const q = new URLSearchParams({f: p.get("f")});
    for (const [k, v] of Object.entries(extra)) if (v !== null && v !== undefined) q.set(k, v);
    return "#" + q.toString();
  }
  const a = (href, text, cls) => `<a href="${esc(href)}"${cls ? ` class="${cls}"` : ""}>${text}</a>`;
  const table = (headers, rows, cls) => `<div class="scroll"><table class="${cls || ""}"><thead><tr>` +
    headers.map((h) => `<th>${esc(h)}</th>`).join("") + "</tr></thead><tbody>" +
    rows.map((r) => "<tr>" + r.map((c) => (c.startsWith("<td") ? c : `<td>${c}</td>`)).join("") + "</tr>").join("\n") +
    "</tbody></table></div>";
  const dl = (pairs) => '<dl class="kv">' + pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join("") + "</dl>";
  // what a reconstruction's status means: `ok` is "judged", not "right" (report/view.py STATUS_TEXT)
  const statusText = (statuses, s) => esc((statuses || {})[s] || s);
  const legend = (pairs) => '<dl class="legend">' + pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`)
    .join("") + "</dl>";
  const passKey = (r) => (r.mode === "dump_all" ? "dump_all" : `${r.mode}_k${r.k}`);

  // -- loading -------------------------------------------------------------------------------
  // The data file's string holds the gzip bytes read as windows-1252 (C.charset): a character below
  // 256 is its own byte; 0x80-0x9F mostly read as other characters, mapped back here.
  const high = {};
  const read = new TextDecoder(C.charset).decode(Uint8Array.from({length: 32}, (_, i) => 0x80 + i));
  for (let i = 0; i < read.length; i++) high[read.charCodeAt(i)] = 0x80 + i;
  window.memauditData = function (key, packed) {
    const bytes = new Uint8Array(packed.length);
    for (let i = 0; i < packed.length; i++) {
      const c = packed.charCodeAt(i);
      bytes[i] = c < 256 ? c : high[c];
    }
    const text = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    text.then((t) => { cache[key] = JSON.parse(t); if (waiting === key) render(); });
  };
  function render() {
    const p = params();
    const key = p.get("f");
    if (!key) { show("report", "<p>no user chosen: open a user from the report's index</p>", []); return; }
    if (!cache[key]) {
      if (waiting !== key) {
        waiting = key;
        const s = document.createElement("script");
        s.charset = C.charset;
        s.src = `${C.data}/${key}.js`;
        s.onerror = () => show("missing", `<p>${esc(C.unwritten || `no data file for ${key}: write the report again`)}</p>`, []);
        document.head.appendChild(s);
      }
      return;
    }
    const user = cache[key];
    const views = {grid, target, episodes, memory};
    const view = views[p.get("v")] || grid;
    const [title, body, crumbs] = view(user, p);
    const extra = (C.sections[p.get("v") || "grid"] || []).map((fn) => fn(user, p)).join("");
    show(title, body + extra, crumbs);
    const anchor = p.get("a") && document.getElementById(p.get("a"));
    if (anchor) { anchor.classList.add("focus"); anchor.scrollIntoView(); }
  }
  function show(title, body, crumbs) {
    document.title = `${title} · memaudit`;
    document.getElementById("crumbs").innerHTML = [a(C.index, "report"), ...crumbs.map(([h, t]) => a(h, esc(t))), esc(title)]
      .join(" › ");
    document.getElementById("app").innerHTML = `<h1>${esc(title)}</h1>\n${body}`;
  }
  if (C.list) { listing(C.list); return; }  // a page of targets (report/view.py _target_list), not a user
  window.addEventListener("hashchange", render);
  window.addEventListener("DOMContentLoaded", render);

  // -- a list of targets: one row per target, opening the target in the user's drill-down ------
  function listing(L) {
    const rows = L.rows.map(([user, cat, dim, score, status, label], i) => {
      const link = (extra) => `${L.app}#${new URLSearchParams({f: L.keys[user], ...extra})}`;
      const first = i === 0 || L.rows[i - 1][0] !== user;  // the user's link once, on the first row
      return [first ? a(link({v: "grid"}), esc(user)) : "", esc(L.categories[cat]),
        a(link({v: "target", d: dim, a: L.anchor}), esc(dim)),
        `<td class="n ${scoreClass(score)}">${num(score, 2)}</td>`, statusText(L.statuses, status), esc(label)];
    });
    document.getElementById("list").innerHTML =
      table(["user", "category", "dimension", "score", "reconstruction", "prediction"], rows);
  }

  // -- helpers over one user's data ----------------------------------------------------------
  function passes(user) {
    return user.runs.flatMap((run) => run.passes.map((ps) => ({...ps, run: run.run, runSlug: run.slug})));
  }
  function recon(user, dim, ps) {
    return (user.recons[dim] || []).find((r) => r.run === ps.run && passKey(r) === ps.slug);
  }
  function item(it) {
    if (!it || typeof it !== "object") return esc(canon(it));
    const rest = {...it};
    delete rest.content;
    const keys = Object.keys(rest);
    return esc(it.content || "") + (keys.length ? `<div class="muted">${esc(canon(rest))}</div>` : "");
  }
  function expand(it, run) {
    if (!it || typeof it !== "object" || !(C.ref in it)) return it;
    const rest = {...it};
    delete rest[C.ref];
    return {...((run.memory || {}).items || [])[it[C.ref]], ...rest};
  }

  // -- grid: every bank entry across runs and passes -------------------------------------------
  function grid(user, p) {
    const all = passes(user);
    const rows = [];
    for (const cat of C.categories) {
      rows.push([`<td colspan="2" class="group" id="${cat}">${esc(cat)}</td>`,
        ...all.map((ps) => `<td class="cell group">${num((ps.categories || {})[cat])}</td>`)]);
      for (const e of user.bank.filter((e) => e.category === cat)) {
        rows.push([a(to(p, {v: "target", d: e.dimension}), esc(e.dimension)), esc(e.short) + runTruths(user, e.dimension),
          ...all.map((ps) => cell(p, e.dimension, ps, recon(user, e.dimension, ps)))]);
      }
    }
    rows.push(['<td colspan="2" class="group">B (category-balanced)</td>',
      ...all.map((ps) => `<td class="cell group" id="${ps.anchor}">${num(ps.B)}</td>`)]);
    const legend = Object.entries(C.marks).filter(([, m]) => m).map(([lb, m]) => `${m} = ${lb}`).join(", ");
    const runs = user.runs.map((r) => a(to(p, {v: "episodes", r: r.run}), esc(r.run))).join(" · ");
    return [`user ${user.user}`, persona(user.persona) + `<p>episodes per run: ${runs}</p>` +
      "<h2>Bank entries across systems and access modes</h2>" +
      table(["dimension", "ground truth", ...all.map((ps) => `${ps.run} · ${ps.name}`)], rows, "grid") +
      `<p class="note">Cells: judge score (colour by rubric level), striped = overflow, dark = failed; letter = ` +
      `attribution label (${esc(legend)}). Each cell opens the target.</p>`, []];
  }
  // A run that stopped before an evolving entry's last change is judged against the value valid at
  // its end: named beside the bank's current value, once per run.
  function truths(user, dim) {
    const found = new Map();
    for (const r of user.recons[dim] || []) if ("truth" in r && !found.has(r.run)) found.set(r.run, r.truth);
    return [...found];
  }
  function runTruths(user, dim) {
    return truths(user, dim).map(([run, truth]) =>
      `<div class="muted">at the end of ${esc(run)}: ${esc(truth)}</div>`).join("");
  }
  function cell(p, dim, ps, r) {
    if (!r) return '<td class="cell snone">—</td>';
    let cls = scoreClass(r.score), text = num(r.score, 2);
    if (r.status === "overflow") [cls, text] = ["ovf", "overflow"];
    if (r.status === "failed") [cls, text] = ["fail", "failed"];
    const label = r.attribution ? r.attribution.label : "";
    const mark = label in C.marks ? C.marks[label] : label;
    if (mark) text += `<span class="mark">${esc(mark)}</span>`;
    return `<td class="cell ${cls}"${label ? ` title="${esc(label)}"` : ""}>` +
      a(to(p, {v: "target", d: dim, a: ps.anchor}), text) + "</td>";
  }
  function persona(pr) {
    if (!pr || typeof pr !== "object" || !Object.keys(pr).length) return "";
    return "<details><summary>persona</summary>" +
      dl(Object.keys(pr).sort().map((k) => [k, esc(typeof pr[k] === "string" ? pr[k] : canon(pr[k]))])) + "</details>";
  }

  // -- target: the ground truth, every read, prediction, verdict and the transcript -------------
  function target(user, p) {
    const dim = p.get("d");
    const entry = user.bank.find((e) => e.dimension === dim);
    const tasks = user.tasks.filter((t) => t.dimension === dim);
    const head = [["dimension", esc(dim)]];
    if (entry) head.push(["category", esc(entry.category)], ["ground truth", `<b>${esc(entry.short)}</b>`],
      ...truths(user, dim).map(([run, truth]) => [`truth at the end of ${esc(run)}`, `<b>${esc(truth)}</b>`]),
      ["explanation", esc(entry.explanation)]);
    else head.push(["bank", '<span class="muted">not in this user\'s bank</span>']);
    for (const t of tasks) {
      head.push([`task ${t.idx}`, esc(t.text)]);
      if (t.rationale) head.push(["rationale", esc(t.rationale)]);
    }
    if (!tasks.length) head.push(["task", '<span class="muted">no task targets this dimension</span>']);
    const section = ((user.sections || {}).target || {})[dim] || "";  // e.g. an evolving entry's history
    const parts = [`<div class="card">${dl(head)}</div>`, section, summary(user, p, dim)];
    for (const run of user.runs) {
      parts.push(`<h2 id="${run.slug}">${esc(run.run)} <span class="muted">(${esc(run.system)})</span></h2>`);
      const cites = [];
      for (const r of (user.recons[dim] || []).filter((r) => r.run === run.run)) {
        parts.push(reading(p, run, r));
        cites.push(...(r.cites || []));
      }
      for (const t of tasks) parts.push(transcript(run, t, run.episodes.find((e) => e.idx === t.idx), cites));
    }
    return [`${user.user} · ${dim}`, parts.join("\n"), [[to(p, {v: "grid"}), user.user]]];
  }
  function summary(user, p, dim) {
    const rows = [];
    for (const ps of passes(user)) {
      const r = recon(user, dim, ps);
      if (!r) continue;
      rows.push([a(C.runs[ps.run], esc(ps.run)), a(to(p, {v: "target", d: dim, a: ps.anchor}), esc(ps.name)),
        `<td class="n ${scoreClass(r.score)}">${num(r.score, 2)}</td>`, statusText(C.statuses, r.status), esc(r.label),
        esc(r.attribution ? r.attribution.label : "")]);
    }
    if (!rows.length) return '<p class="muted">not scored in any selected run</p>';
    return table(["run", "pass", "score", "reconstruction", "prediction", "attribution"], rows) + legend(C.legend || []);
  }
  function reading(p, run, r) {
    const ps = run.passes.find((x) => x.slug === passKey(r));
    const ev = r.evidence || {};
    let shown;
    if (r.mode === "dump_all") {
      shown = `${a(to(p, {v: "memory", r: run.run}), "the whole final store")}: ${esc(ev.n_items === undefined ? "?" : ev.n_items)}` +
        ` items, ${esc(ev.chars === undefined ? "?" : ev.chars)} characters`;
    } else {
      const items = (ev.items || []).map((it) => expand(it, run));
      shown = items.length ? `top-${r.k} retrieved items (${items.length})<ol class="items">` +
        items.map((it) => `<li>${item(it)}</li>`).join("") + "</ol>" : "no items retrieved";
    }
    const rows = [["reconstruction", statusText(C.statuses, r.status) +
      (r.error ? ` <span class="muted">${esc(r.error)}</span>` : "")],
      ...("truth" in r ? [["judged against", `<b>${esc(r.truth)}</b> (the value at this run's end)`]] : []),
      ["memory read", shown], ["prediction", r.label !== null ? `<b>${esc(r.label)}</b>` : "—"],
      ["reader's reason", esc(r.reason)],
      ["judge score", `<span class="badge ${scoreClass(r.score)}">${num(r.score, 2)}</span>`],
      ["judge's reason", esc(r.judge_reason)]];
    const at = r.attribution;
    if (at) {
      rows.push(["attribution", `<b>${esc(at.label)}</b>` + (at.ep_index !== null ? ` · episode ${at.ep_index}` : "") +
        (at.note ? ` <span class="muted">${esc(at.note)}</span>` : "")]);
      (at.stages || []).forEach((s, i) => rows.push([`stage ${stageName(i, s)}`, stage(s)]));
    }
    const name = ps ? ps.name : r.mode;
    return `<div class="pass" id="${ps ? ps.anchor : ""}"><h3>${esc(name)}</h3>${dl(rows)}</div>`;
  }
  function stageName(i, s) {
    if (!s || typeof s !== "object") return String(i);
    const n = "stage" in s ? s.stage : i;
    return s.name ? `${n} · ${s.name}` : String(n);
  }
  function stage(s) {
    if (!s || typeof s !== "object") return `<pre>${esc(canon(s))}</pre>`;
    return dl(Object.keys(s).sort().filter((k) => k !== "stage" && k !== "name")
      .map((k) => [k, typeof s[k] === "string" ? esc(s[k]) : `<code>${esc(canon(s[k]))}</code>`]));
  }
  function marked(text, quotes) {
    text = text || "";
    const lower = text.toLowerCase();
    const spans = quotes.map((q) => [lower.indexOf(q.toLowerCase()), q.length]).filter(([i]) => i >= 0)
      .map(([i, n]) => [i, i + n]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    const merged = [];
    for (const [s, e] of spans) {
      if (merged.length && s <= merged[merged.length - 1][1]) merged[merged.length - 1][1] = Math.max(merged[merged.length - 1][1], e);
      else merged.push([s, e]);
    }
    let out = "", pos = 0;
    for (const [s, e] of merged) { out += esc(text.slice(pos, s)) + `<mark>${esc(text.slice(s, e))}</mark>`; pos = e; }
    return out + esc(text.slice(pos));
  }
  function transcript(run, task, ep, cites) {
    const anchor = `${run.slug}-e${task.idx}`;
    if (!ep) return `<p id="${anchor}" class="muted">episode ${task.idx}: not run in this run</p>`;
    const quotes = cites.map((c) => c[2]).filter((q) => q);
    const line = (turn, who, text, extra) => {
      const lower = (text || "").toLowerCase();
      const why = [...new Set(cites.filter(([, n, q]) => n === turn || (q && lower.includes(q.toLowerCase())))
        .map(([name]) => name))].sort();
      const cls = why.length ? " cited" : "";
      const note = why.length ? `<div class="muted">cited by ${esc(why.join(", "))}</div>` : "";
      return `<div class="who${cls}">${who}</div><div class="text${cls}">${marked(text, quotes)}${extra || ""}${note}</div>`;
    };
    const rows = [`<div class="turn" id="${anchor}-t0">` + line(0, "task<br>user", ep.task) + "</div>"];
    for (const [turn, assistant, feedback, userText, score, fallback] of ep.turns) {
      const sc = score === null ? "unscorable" : `preference ${num(score, 2)}`;
      rows.push(`<div class="turn" id="${anchor}-t${turn}">` +
        line(turn, `turn ${turn}<br>assistant`, assistant, `<div class="muted">${sc}</div>`) +
        line(turn, `user<br><span class="badge">${esc(feedback)}</span>`, userText,
          fallback ? ' <span class="badge">simulator fallback</span>' : "") + "</div>");
    }
    const head = `transcript of episode ${task.idx}: ${esc(ep.end)}, ${ep.n_turns} turns` + (ep.error ? ` (${esc(ep.error)})` : "");
    return `<details open id="${anchor}"><summary>${head}</summary>${rows.join("")}</details>`;
  }

  // -- episodes and final memory of one run ------------------------------------------------------
  function episodes(user, p) {
    const run = user.runs.find((r) => r.run === p.get("r")) || {episodes: [], run: p.get("r")};
    const rows = run.episodes.map((ep) => {
      const t = user.tasks.find((x) => x.idx === ep.idx);
      const scores = ep.turns.map((x) => x[4]).filter((s) => s !== null);
      const mean = scores.length ? num(scores.reduce((x, y) => x + y, 0) / scores.length, 2) : "—";
      return [`<td class="n">${ep.idx}</td>`, esc(ep.task),
        t ? a(to(p, {v: "target", d: t.dimension, a: `${run.slug}-e${ep.idx}`}), esc(t.dimension)) : "—",
        esc(ep.end), `<td class="n">${ep.n_turns}</td>`, `<td class="n">${mean}</td>`];
    });
    return [`${run.run} · ${user.user} · episodes`,
      table(["#", "task", "target (opens the transcript)", "end", "turns", "mean preference"], rows),
      [[C.runs[run.run], run.run], [to(p, {v: "grid"}), user.user]]];
  }
  function memory(user, p) {
    const run = user.runs.find((r) => r.run === p.get("r")) || {run: p.get("r")};
    const m = run.memory;
    const body = !m ? '<p class="muted">no memory snapshot recorded</p>' :
      `<p>${m.n_items} items, ${num(m.avg_chars, 1)} chars/item, after task ${m.task_idx}.</p>` +
      `<ol class="items">${m.items.map((it) => `<li>${item(it)}</li>`).join("")}</ol>`;
    return [`${run.run} · ${user.user} · final memory`, body, [[C.runs[run.run], run.run], [to(p, {v: "grid"}), user.user]]];
  }
})();
