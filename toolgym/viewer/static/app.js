// toolgym view: runs, steps and episodes of the run directories the server was given.
// Every text that comes from a run (a model's output, an env's answer) is set as text,
// never parsed as HTML.
"use strict";

const CURVES = [
  ["rollout/success", "eval/success", "held_out/success"],
  ["rollout/reward"],
  ["rollout/valid_actions"],
  // what the updates paid valid and malformed calls: how a collapse of valid calls began
  ["adv/valid_turns", "adv/invalid_turns"],
  // each reward that is not the verified outcome: its agreement with it (0.5: none), beside
  // success, and its score; a proxy rising while success falls is being gamed
  ["proxy/*/agreement", "rollout/success"],
  ["proxy/*/score"],
  ["train/loss"],
  // how far each update moved the policy: its mini-batches, and where its last step left it
  ["train/kl_ref", "train/approx_kl", "train/approx_kl_after"],
  ["train/entropy"],
  ["train/clip_fraction"],
  // token fidelity: the engine's log-probabilities against the learner's (training/update/fidelity.py)
  ["train/fidelity_gap_mean", "train/fidelity_gap_max"],
  ["train/fidelity_over"],
  ["async/staleness_mean", "async/staleness_max"],
  ["explore/distinct_per_group", "explore/repeated_actions"],
  ["signal/equal_groups"],
  ["adv/anchor_coverage_after_first"],
  ["time/rollout_s", "time/update_s", "time/eval_s"],
  // self-play: proposals kept, why the rest were rejected, solve rates, the task pool
  ["groups/valid", "groups/unique"],
  ["groups/rejected/"],
  ["groups/solve_rate", "groups/snapshot_solve_rate"],
  ["groups/pool", "groups/solver_groups/pool"],
];
const COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#57606a"];
const POLL_MS = 3000;
const PAGE = 50;

let runs = [];
const records = new Map(); // run number -> its records, in step order
let poller = null;
let visit = 0; // counts the pages opened: an answer for one the user has left is dropped
let xAxis = "steps"; // or "env steps": runs compared at equal cost

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "style") node.style.cssText = v; // CSSOM: the page's policy forbids style attributes
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

class Superseded extends Error {}

async function api(path) {
  // an answer that comes after the user has moved on is dropped, a failure too: drawn, it
  // would cover the page they moved to with the one they left
  const asked = visit;
  const dropIfLeft = () => { if (asked !== visit) throw new Superseded(`${path} answered after the page changed`); };
  let answer, body;
  try {
    answer = await fetch(path);
    body = await answer.json();
  } catch (error) {
    dropIfLeft();
    throw error;
  }
  dropIfLeft();
  if (!answer.ok) throw new Error(body.error || answer.statusText);
  return body;
}

function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "-";
  if (typeof value !== "number") return String(value);
  if (value !== 0 && Math.abs(value) < 0.001) return value.toExponential(2);
  return value.toFixed(digits);
}

function show(...children) {
  const page = document.getElementById("page");
  page.replaceChildren(...children.filter((child) => child !== null && child !== undefined));
}

function trail(...parts) {
  const nav = document.getElementById("trail");
  nav.replaceChildren(...parts.map(([text, href]) => (href ? el("a", { href, text }) : el("span", { text }))));
}

// ----- records, kept fresh while a run trains -------------------------------------------
async function refresh(numbers) {
  let grew = false;
  for (const n of numbers) {
    const known = records.get(n) || [];
    const since = known.length ? known[known.length - 1].step : -1;
    const fresh = await api(`/api/runs/${n}/records?since=${since}`);
    if (fresh.length) {
      records.set(n, known.concat(fresh));
      grew = true;
    } else if (!records.has(n)) records.set(n, known);
  }
  return grew;
}

function poll(numbers, redraw) {
  if (poller) clearInterval(poller);
  const live = document.getElementById("live");
  poller = setInterval(async () => {
    try {
      if (await refresh(numbers)) {
        live.textContent = `updated ${new Date().toLocaleTimeString()}`;
        await redraw();
      }
    } catch (error) {
      if (!(error instanceof Superseded)) live.textContent = `not updating: ${error.message}`;
    }
  }, POLL_MS);
}

// ----- curves ------------------------------------------------------------------------------
function expand(keys, numbers) {
  // a key ending in "/" stands for every key under it that the runs' records hold, and a
  // "*" for any one name; an interval's _low and _high keys are its series' band, not series
  const seen = new Set();
  for (const n of numbers) for (const r of records.get(n) || []) for (const k of Object.keys(r)) seen.add(k);
  const found = (test) => [...seen].filter((k) => test(k) && !/_(low|high)$/.test(k)).sort();
  return keys.flatMap((key) => {
    if (key.includes("*")) {
      const [head, tail] = key.split("*");
      return found((k) => k.startsWith(head) && k.endsWith(tail) && !k.slice(head.length, k.length - tail.length).includes("/"));
    }
    return key.endsWith("/") ? found((k) => k.startsWith(key)) : [key];
  });
}

function ticks(lo, hi, count, least = 0) {
  // round values 1, 2 or 5 times a power of ten apart (at least `least`) that span [lo, hi]
  const raw = (hi - lo) / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(least, [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw * 0.999));
  const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
  const out = [];
  for (let k = first; k <= last; k++) out.push(Number((k * step).toPrecision(12)));
  return { values: out, step };
}

function scaleOf(values) {
  // values this small or large are drawn as multiples of a power of ten, named on the axis
  const largest = Math.max(...values.map(Math.abs));
  if (!(largest > 0) || (largest >= 0.01 && largest < 1e5)) return 0;
  return Math.floor(Math.log10(largest));
}

function envStepsSoFar(run) {
  // each step's cumulative env steps (a record holds its own step's)
  const out = new Map();
  let total = 0;
  for (const r of records.get(run) || []) {
    total += typeof r.env_steps === "number" && r.step > 0 ? r.env_steps : 0;
    out.set(r.step, total);
  }
  return out;
}

function chart(wanted, numbers) {
  const keys = expand(wanted, numbers);
  const series = [];
  for (const n of numbers) {
    const sofar = xAxis === "env steps" ? envStepsSoFar(n) : null; // once a run, not a point
    for (const key of keys) {
      const points = (records.get(n) || []).filter((r) => typeof r[key] === "number")
        .map((r) => ({ x: sofar ? sofar.get(r.step) : r.step, y: r[key], low: r[key + "_low"], high: r[key + "_high"] }))
        .filter((p) => typeof p.x === "number");
      if (points.length) series.push({ n, key, points, colour: COLOURS[(numbers.indexOf(n) * keys.length + keys.indexOf(key)) % COLOURS.length] });
    }
  }
  if (!series.length) return null;
  const ys = series.flatMap((s) => s.points.flatMap((p) => [p.y, p.low, p.high])).filter((v) => typeof v === "number");
  const exponent = scaleOf(ys);
  const unit = Math.pow(10, exponent);
  let y0 = Math.min(...ys) / unit, y1 = Math.max(...ys) / unit;
  if (y0 >= 0 && y0 < y1 - y0) y0 = 0; // a share or a count reads against its zero
  if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
  const yTicks = ticks(y0, y1, 5);
  const yRange = [yTicks.values[0], yTicks.values[yTicks.values.length - 1]];
  // runs of very different lengths each get their own x axis, so a short run is not a corner
  const extents = numbers.map((n) => Math.max(0, ...series.filter((s) => s.n === n).flatMap((s) => s.points.map((p) => p.x))));
  const apart = numbers.length > 1 && Math.max(...extents) > 2 * Math.max(1, Math.min(...extents.filter((e) => e > 0)));
  const groups = apart ? numbers.map((n) => series.filter((s) => s.n === n)).filter((g) => g.length) : [series];
  const panels = groups.map((g) => panel(g, yTicks, yRange, unit, apart && numbers.length > 1 ? runs[g[0].n].name : null));
  const legend = el("div", { class: "legend" }, ...series.map((s) => {
    const name = numbers.length > 1 ? `${runs[s.n].name}: ${s.key}` : s.key;
    return el("span", {}, el("span", { class: "swatch", style: `background:${s.colour}` }), name);
  }), exponent ? el("span", { class: "unit", text: `values ×1e${exponent}` }) : null);
  return el("div", { class: "chart", "data-keys": wanted.join(",") }, ...panels, legend);
}

function panel(series, yTicks, yRange, unit, title) {
  const W = 420, H = title ? 160 : 190, L = 44, R = 10, T = title ? 20 : 8, B = 34;
  const xs = series.flatMap((s) => s.points.map((p) => p.x));
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const xTicks = ticks(x0, x1, 5, 1).values.filter((v) => v >= x0 - 1e-9 && v <= x1 + 1e-9);
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - (y / unit - yRange[0]) / (yRange[1] - yRange[0])) * (H - T - B);
  const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img" });
  const text = (x, y, value, anchor, kind) => { const t = svg("text", { x, y, "text-anchor": anchor, class: kind || "" }); t.textContent = value; box.append(t); };
  if (title) text(L, 13, title, "start");
  for (const v of yTicks.values) {
    const y = T + (1 - (v - yRange[0]) / (yRange[1] - yRange[0])) * (H - T - B);
    box.append(svg("line", { x1: L, y1: y, x2: W - R, y2: y, stroke: "#eaeef2", class: "grid" }));
    text(L - 4, y + 3.5, tickLabel(v, yTicks.step), "end", "y-label");
  }
  for (const v of xTicks) {
    box.append(svg("line", { x1: X(v), y1: H - B, x2: X(v), y2: H - B + 4, stroke: "#8c959f", class: "tick" }));
    text(X(v), H - B + 15, tickLabel(v, 1), "middle", "x-label");
  }
  box.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#8c959f" }));
  text((L + W - R) / 2, H - 4, xAxis, "middle", "x-title");
  series.forEach((s, k) => {
    const band = s.points.filter((p) => typeof p.low === "number" && typeof p.high === "number");
    if (band.length) {
      const d = band.map((p, i) => `${i ? "L" : "M"}${X(p.x)},${Y(p.high)}`).join("")
        + band.slice().reverse().map((p) => `L${X(p.x)},${Y(p.low)}`).join("") + "Z";
      box.append(svg("path", { d, fill: s.colour, "fill-opacity": 0.12, stroke: "none" }));
    }
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${X(p.x)},${Y(p.y)}`).join("");
    box.append(svg("path", { d, fill: "none", stroke: s.colour, "stroke-width": 1.5, "stroke-dasharray": k % 2 ? "4 2" : "" }));
    for (const p of s.points.length < 40 ? s.points : []) box.append(svg("circle", { cx: X(p.x), cy: Y(p.y), r: 2.2, fill: s.colour }));
  });
  return box;
}

function tickLabel(value, step) {
  // as many decimals as the ticks' spacing needs, and no more
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  const abs = Math.abs(value);
  if (abs >= 1e4) return `${Number((value / 1000).toPrecision(3))}k`;
  return value.toFixed(decimals);
}

function curves(numbers) {
  const holder = el("div", { class: "charts", id: "curves" });
  const draw = () => holder.replaceChildren(...CURVES.map((keys) => chart(keys, numbers)).filter(Boolean));
  const pick = el("select", { id: "x-axis", onchange: () => { xAxis = pick.value; draw(); } },
    ...["steps", "env steps"].map((a) => { const o = el("option", { value: a, text: a }); o.selected = a === xAxis; return o; }));
  draw();
  return [el("div", {}, el("label", { class: "dim" }, "x axis ", pick), holder), draw];
}

// ----- pages ---------------------------------------------------------------------------------
const rate = (part) => (part ? `${fmt(part.success)} [${fmt(part.low, 2)}, ${fmt(part.high, 2)}]` : "-");

function summaryCells(summary) {
  if (!summary) return ["running or no summary yet", "-", "-"];
  return [`${summary.status}, ${summary.steps} of ${summary.steps_planned} steps`, rate(summary.start), rate(summary.end)];
}

function evalSets(summary) {
  // every eval set at the start and the end: the held-out ones (pooled into the run's one
  // held-out figure) and the transfer sets
  if (!summary || !summary.sets) return null;
  const pooled = summary.held_out || ["eval"];
  const rows = Object.entries(summary.sets).map(([name, f]) => el("tr", {},
    el("td", { text: name }), el("td", { text: pooled.includes(name) ? "held out" : "transfer" }),
    el("td", { text: String((f.end || f.start || {}).items ?? "-") }),
    el("td", { text: rate(f.start) }), el("td", { text: rate(f.end) })));
  return el("table", { id: "eval-sets" },
    el("tr", {}, ...["eval set", "kind", "items", "at start", "at end"].map((t) => el("th", { text: t }))), ...rows);
}

async function home() {
  trail();
  const numbers = runs.map((r) => r.number);
  await refresh(numbers);
  const rows = runs.map((r) => el("tr", {},
    el("td", {}, el("a", { href: `#/run/${r.number}`, text: r.name })),
    el("td", { text: r.config.model || "-" }),
    ...summaryCells(r.summary).map((text) => el("td", { text })),
    el("td", { text: String(r.steps.length) })));
  const table = el("table", {}, el("tr", {}, ...["run", "model", "status", "held out at start", "at end", "steps kept"].map((t) => el("th", { text: t }))), ...rows);
  const [holder, draw] = curves(numbers);
  show(el("h2", { text: `${runs.length} run${runs.length > 1 ? "s" : ""}` }), table, el("h2", { text: "curves" }), holder);
  poll(numbers, draw);
}

function flatten(value, prefix, out) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else out.push([prefix, JSON.stringify(value)]);
  return out;
}

function pooledNote(summary) {
  const pooled = (summary && summary.held_out) || ["eval"];
  return pooled.length > 1 ? ` (${pooled.join(" and ")} pooled)` : "";
}

async function runPage(n) {
  const run = runs[n];
  trail([run.name, null]);
  await refresh([n]);
  const [holder, draw] = curves([n]);
  const steps = el("div", { id: "steps" });
  const drawSteps = async () => {
    const fresh = (await api("/api/runs")).find((r) => r.number === n);
    steps.replaceChildren(...fresh.steps.map((s) => el("a", { href: `#/run/${n}/step/${s}`, text: `step ${s}`, style: "margin-right:.6em" })));
    const log = await api(`/api/runs/${n}/log`);
    logBox.textContent = log.join("\n");
  };
  const logBox = el("pre", { id: "log" });
  const settings = el("table", {}, ...flatten(run.config, "", []).map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { text: v }))));
  const [status, start, end] = summaryCells(run.summary);
  show(
    el("h2", { text: run.name }), el("p", { class: "dim", text: run.path }),
    el("p", {}, `${status}; held out${pooledNote(run.summary)} at the start ${start}, at the end ${end}`),
    evalSets(run.summary),
    el("h2", { text: "curves" }), holder,
    el("h2", { text: "kept steps" }), steps,
    el("h2", { text: "log" }), logBox,
    el("details", {}, el("summary", { text: "settings" }), settings),
  );
  await drawSteps();
  poll([n], async () => { draw(); await drawSteps(); });
}

function query(params) {
  return Object.entries(params).filter(([, v]) => v !== "" && v !== undefined && v !== null)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
}

async function stepPage(n, step, params) {
  const run = runs[n];
  trail([run.name, `#/run/${n}`], [`step ${step}`, null]);
  const offset = Number(params.get("offset") || 0);
  const filters = {};
  for (const k of ["env", "role", "success", "masked", "min", "max", "q"]) filters[k] = params.get(k) || "";
  const page = await api(`/api/runs/${n}/steps/${step}?${query({ ...filters, offset, limit: PAGE })}`);
  const form = el("form", { class: "filters", id: "filters" });
  const choice = (name, options) => el("label", {}, `${name} `, el("select", { name },
    ...["", ...options].map((o) => { const opt = el("option", { value: o, text: o || "any" }); if (o === filters[name]) opt.selected = true; return opt; })));
  const field = (name, label) => el("label", {}, `${label} `, el("input", { name, value: filters[name] }));
  form.append(choice("env", page.envs), choice("role", page.roles), choice("success", ["yes", "no"]), choice("masked", ["yes", "no"]),
    field("min", "return >="), field("max", "return <="), field("q", "text"), el("button", { type: "submit", text: "filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = Object.fromEntries(new FormData(form).entries());
    location.hash = `#/run/${n}/step/${step}?${query(chosen)}`;
  });
  const header = ["#", "episode", "group", "env", "role", "return", "success", "turns", "trained", "masked", "same task"];
  const rows = page.rows.map((r) => el("tr", { class: "episode-row" },
    el("td", { text: String(r.index) }),
    el("td", {}, el("a", { href: `#/run/${n}/step/${step}/episode/${r.index}`, text: r.id })),
    el("td", { text: r.group_id }), el("td", { text: r.env }), el("td", { text: r.role }),
    el("td", { text: fmt(r.return) }), el("td", { text: r.success ? "yes" : "no", class: r.success ? "good" : "" }),
    el("td", { text: String(r.turns) }), el("td", { text: r.trained ? "yes" : "no" }),
    el("td", { text: r.masked ? `masked: ${r.infra_error}` : "", class: "bad" }),
    el("td", {}, el("a", { href: `#/run/${n}/item/${r.item}`, text: "across steps" }))));
  const move = (to) => { location.hash = `#/run/${n}/step/${step}?${query({ ...filters, offset: to })}`; };
  const pager = el("div", { class: "pager" },
    el("button", { id: "previous", text: "previous", onclick: () => move(Math.max(0, offset - PAGE)) }),
    el("button", { id: "next", text: "next", onclick: () => move(offset + PAGE) }),
    el("span", { id: "shown", text: `${page.matching ? offset + 1 : 0}-${offset + page.rows.length} of ${page.matching} matching (${page.total} kept${typeof page.played === "number" ? ` of ${page.played} played` : ""})` }));
  pager.querySelector("#previous").disabled = offset <= 0;
  pager.querySelector("#next").disabled = offset + PAGE >= page.matching;
  const skipped = page.skipped.length
    ? el("p", { class: "warn", id: "skipped", text: `skipped ${page.skipped.length} unreadable line${page.skipped.length > 1 ? "s" : ""}: ${page.skipped.slice(0, 3).join("; ")}` })
    : null;
  const figures = page.figures ? el("p", { id: "figures", text: `the step: ${page.figures}` }) : null;
  show(el("h2", { text: `step ${step}` }), figures, skipped, form, pager,
    el("table", { id: "episodes" }, el("tr", {}, ...header.map((t) => el("th", { text: t }))), ...rows));
}

function sharedStart(texts) {
  // how many characters every one of `texts` starts with
  let k = 0;
  while (texts.every((x) => k < x.length && x[k] === texts[0][k])) k++;
  return k;
}

function differing(action, shared) {
  // an anchor mate's action from where the actions differ (the call's name and keys they
  // share are elided), its whitespace collapsed; the whole text opens below it
  const from = shared > 12 ? Math.max(0, shared - 12) : 0;
  const rest = action.slice(from).replace(/\s+/g, " ");
  return `${from ? "…" : ""}${rest.length > 60 ? `${rest.slice(0, 60)}…` : rest}`;
}

function shade(advantage, scale) {
  if (advantage === null || advantage === undefined) return "";
  const a = Math.min(1, Math.abs(advantage) / scale) * 0.55;
  return advantage >= 0 ? `rgba(26,127,55,${a.toFixed(3)})` : `rgba(207,34,46,${a.toFixed(3)})`;
}

function message(m) {
  const role = m.role || "?";
  const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 1);
  return el("div", { class: `message ${role}` }, el("span", { class: "role", text: role === "tool" ? `tool · ${m.name || ""}` : role }), content);
}

async function episodePage(n, step, index) {
  const run = runs[n];
  const e = await api(`/api/runs/${n}/steps/${step}/episodes/${index}`);
  trail([run.name, `#/run/${n}`], [`step ${step}`, `#/run/${n}/step/${step}`], [`episode ${index}`, null]);
  const scale = Math.max(1e-9, ...e.turns.map((t) => Math.abs(t.advantage || 0)));
  const facts = (...pairs) => el("div", { class: "facts" }, ...pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([k, v]) => [el("b", { text: `${k} ` }), `${v}   `]));
  const turns = e.turns.map((t) => {
    const tokens = el("div", { class: "tokens" }, ...(e.tokenizer_problem ? [t.action] : t.tokens.map((tok) => el("span", {
      class: "token", "data-advantage": t.advantage === null ? "" : String(t.advantage),
      style: `background:${shade(t.advantage, scale)}`,
      title: `token ${tok.id}${tok.logprob === null ? "" : `, log-probability ${tok.logprob.toFixed(3)}`}${t.advantage === null ? "" : `, advantage ${t.advantage.toFixed(4)}`}`,
      text: tok.text,
    }))));
    const shared = sharedStart([t.action, ...t.anchor_mates.map((m) => m.action)]);
    const mates = t.anchor_mates.length
      ? el("div", { class: "facts" }, el("b", { text: "anchor shared with " }),
        ...t.anchor_mates.map((m) => el("details", { class: "mate" },
          el("summary", {}, el("a", { href: `#/run/${n}/step/${step}/episode/${m.index}`, text: `${m.id} turn ${m.turn}` }),
            ` advantage ${fmt(m.advantage)}: `, el("span", { class: "mate-differs", text: differing(m.action, shared) })),
          el("pre", { class: "mate-action", text: m.action }))))
      : null;
    return el("div", { class: "turn", "data-turn": String(t.turn) },
      facts(["turn", t.turn], ["advantage", t.advantage === null ? "not trained" : fmt(t.advantage, 4)], ["reward", fmt(t.reward)],
        ["components", Object.keys(t.rewards).length ? Object.entries(t.rewards).map(([k, v]) => `${k} ${fmt(v)}`).join(", ") : ""],
        ["scores", Object.entries(t.scores || {}).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")],
        ["valid", t.valid ? "yes" : "no"], ["error", t.error], ["finish", t.finish_reason],
        ["policy version", t.policy_version], ["staleness", t.staleness]),
      el("span", { class: "role", text: "assistant" }), tokens,
      ...t.observation.map(message),
      facts(["state", t.state], ["reached", t.next_state], ["anchor", t.anchor !== t.state ? t.anchor : ""]),
      mates,
      t.result === null ? null : el("pre", { text: `result: ${JSON.stringify(t.result, null, 1)}` }));
  });
  show(
    el("h2", { text: e.id }),
    facts(["env", e.env], ["role", e.role], ["seed", e.seed], ["end", e.end], ["return", fmt(e.return)],
      ["success", e.success ? "yes" : "no"], ["tokens", `${e.tokens} (${e.generated} generated)`],
      ["scores", Object.entries(e.scores || {}).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")]),
    e.answer !== null || e.verdict !== null
      ? facts(["the agent answered", e.answer === null ? "(none)" : e.answer], ["the checker", e.verdict],
        ["expected", e.expected === null || e.expected === undefined ? "" : e.expected]) : null,
    e.masked ? el("p", { class: "bad", id: "mask", text: `masked, not trained: ${e.infra_error}` }) : null,
    !e.masked && !e.trained ? el("p", { class: "warn", id: "untrained", text: `not trained on: ${e.untrained || "it has no turns"}` }) : null,
    e.tokenizer_problem ? el("p", { class: "warn", text: `no per-token view: ${e.tokenizer_problem}` }) : null,
    el("p", {}, el("a", { href: `#/run/${n}/item/${e.item}`, text: "this task across steps" })),
    e.task ? el("pre", { text: `task: ${JSON.stringify(e.task, null, 1)}` }) : null,
    ...e.messages.map(message),
    ...e.images.map((src) => el("img", { class: "shot", src, alt: "screenshot" })),
    ...turns,
  );
}

async function itemPage(n, item) {
  const run = runs[n];
  trail([run.name, `#/run/${n}`], ["one task across steps", null]);
  const rows = await api(`/api/runs/${n}/items/${item}`);
  show(el("h2", { text: "one task across the kept steps" }),
    el("table", { id: "across" }, el("tr", {}, ...["step", "episode", "return", "success", "turns"].map((t) => el("th", { text: t }))),
      ...rows.map((r) => el("tr", {}, el("td", { text: String(r.step) }),
        el("td", {}, el("a", { href: `#/run/${n}/step/${r.step}/episode/${r.index}`, text: r.id })),
        el("td", { text: fmt(r.return) }), el("td", { text: r.success ? "yes" : "no" }), el("td", { text: String(r.turns) })))));
}

async function route() {
  visit += 1;
  if (poller) { clearInterval(poller); poller = null; }
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(search || "");
  const parts = path.split("/").filter(Boolean);
  try {
    if (!runs.length) runs = await api("/api/runs");
    const n = Number(parts[1]);
    if (parts[0] === "run" && runs[n]) {
      if (parts[2] === "step" && parts[4] === "episode") return await episodePage(n, Number(parts[3]), Number(parts[5]));
      if (parts[2] === "step") return await stepPage(n, Number(parts[3]), params);
      if (parts[2] === "item") return await itemPage(n, parts[3]);
      return await runPage(n);
    }
    return await home();
  } catch (error) {
    if (!(error instanceof Superseded)) show(el("p", { class: "bad", id: "error", text: error.message }));
  }
}

window.addEventListener("hashchange", route);
route();
