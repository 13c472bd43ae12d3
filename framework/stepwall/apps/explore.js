// The stepwall explorer page's script (see framework/stepwall/apps/explore.py): reads the data block,
// evaluates stepwallModel (the compiled model) on every control change and draws the page.
(function () {
  "use strict";
  const T0 = performance.now();
  const D = JSON.parse(document.getElementById("stepwall-data").textContent);
  const MODEL = stepwallModel,
    SIDES = stepwallSides;
  const NM = D.metrics.length,
    NT = D.terms.length,
    NC = D.constraints.length;
  const IDX = Object.create(null);
  D.parameters.forEach((p, i) => {
    IDX[p.path] = i;
  });
  const SPEC = Float64Array.from(D.parameters, (p) => p.value);
  const cur = Float64Array.from(SPEC);
  const MI = Object.create(null);
  D.metrics.forEach((m, i) => {
    MI[m] = i;
  });
  const CTRL = Object.create(null);
  D.controls.forEach((c) => {
    CTRL[c.path] = c;
  });
  const $ = (id) => document.getElementById(id);
  const timing = (window.stepwallTiming = {
    ready: null,
    firstPaint: null,
    update: null,
    updates: 0,
  });
  const COLORS = {
    moe: "#2b63d9",
    dense: "#7a4fd1",
    attention: "#0e9384",
    comm: "#d97706",
    base: "#6b7280",
    spec: "#c2417b",
  };
  const EXTRA = ["#3f8f3f", "#a16207", "#0369a1", "#9f1239"];

  // ---------------------------------------------------------------- formatting (as Python)
  function pyStr(v) {
    return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  }
  function stripZeros(s) {
    return s.indexOf(".") < 0 ? s : s.replace(/0+$/, "").replace(/\.$/, "");
  }
  function pyG(v, p) {
    // format(v, ".{p}g")
    if (!Number.isFinite(v)) return pyStr(v);
    if (v === 0) return Object.is(v, -0) ? "-0" : "0";
    const ex = v.toExponential(p - 1),
      at = ex.indexOf("e"),
      x = parseInt(ex.slice(at + 1), 10);
    if (x < -4 || x >= p) {
      const e = Math.abs(x) < 10 ? "0" + Math.abs(x) : String(Math.abs(x));
      return stripZeros(ex.slice(0, at)) + "e" + (x < 0 ? "-" : "+") + e;
    }
    return stripZeros(v.toFixed(p - 1 - x));
  }
  const PREFIX = [
    [1e15, "P"],
    [1e12, "T"],
    [1e9, "G"],
    [1e6, "M"],
    [1e3, "k"],
    [1, ""],
  ];
  function quantity(v, unit) {
    // stepwall.core.units.format_quantity
    if (!Number.isFinite(v)) return pyStr(v);
    if (unit === "s") {
      for (const [s, pre] of [
        [1, ""],
        [1e-3, "m"],
        [1e-6, "u"],
        [1e-9, "n"],
      ])
        if (Math.abs(v) >= s || s === 1e-9) return pyG(v / s, 4) + " " + pre + "s";
    }
    for (const [s, pre] of PREFIX)
      if (Math.abs(v) >= s || s === 1) return pyG(v / s, 4) + " " + pre + unit;
    return pyG(v, 4);
  }
  function sideValue(v, unit) {
    // stepwall.model.constraints._fmt
    if (!Number.isFinite(v)) return pyStr(v);
    if (unit === "") return Number.isInteger(v) ? BigInt(v).toString() : pyG(v, 4);
    if (unit.startsWith("dim:")) return pyG(v, 4) + " " + unit.slice(4);
    return quantity(v, unit);
  }
  function pretty(v, unit) {
    // for the cards: µ for u, thousands grouped
    if (!Number.isFinite(v)) return pyStr(v);
    if (unit === "s" || unit === "B" || unit === "B/s")
      return quantity(v, unit).replace(" us", " µs");
    if (Math.abs(v) >= 1e4)
      return Math.round(v)
        .toString()
        .replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return Number.isInteger(v) ? String(v) : pyG(v, 4);
  }

  // ---------------------------------------------------------------- evaluation
  // the metrics that must be finite where a point is feasible: all but the optional ones
  // (energy, cost), which are unknown rather than infeasible (as eval's feasibility)
  const OPTIONAL = new Set(D.optional || []);
  const FINITE = D.metrics.map((m, i) => (OPTIONAL.has(m) ? -1 : i)).filter((i) => i >= 0);
  function feasibleOut(out) {
    for (const i of FINITE) if (!Number.isFinite(out[i])) return false;
    for (let i = NM + NT; i < out.length; i++) if (!out[i]) return false;
    return true;
  }
  function evaluate(p) {
    const out = MODEL(p);
    const metrics = out.slice(0, NM),
      terms = out.slice(NM, NM + NT),
      holds = out.slice(NM + NT);
    return { metrics, terms, holds, feasible: feasibleOut(out) };
  }
  // The model at whole values of one parameter, the others as in p: the repair hints, the
  // wall's first feasible whole N and the chart of a whole-number key need the same points,
  // and while only that parameter moves (dragging its slider) they stay valid.
  const TABLES = new Map();
  function wholeTable(key, p) {
    const i = IDX[key],
      q = Float64Array.from(p);
    q[i] = 0;
    const sig = q.join(",");
    let t = TABLES.get(key);
    if (!t || t.sig !== sig) {
      t = { sig, q, i, outs: [] };
      TABLES.set(key, t);
    }
    return t;
  }
  function wholeAt(t, v) {
    let o = t.outs[v];
    if (o === undefined) {
      t.q[t.i] = v;
      o = t.outs[v] = MODEL(t.q);
    }
    return o;
  }
  function clusterGpus(p) {
    const a = IDX[D.cluster_keys[0]],
      b = IDX[D.cluster_keys[1]];
    return a === undefined || b === undefined ? 0 : Math.trunc(p[a] * p[b]);
  }
  function roundHalfEven(x) {
    const r = Math.round(x);
    return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
  }
  function hintCandidates(key, now, p) {
    // a degree: every whole value from 1 to max(the cluster's GPUs, twice the value, 8) (at
    // most D.hint_limit); a workload size: D.hint_limit evenly spaced whole values below it
    if (key.startsWith("parallel.")) {
      const limit = Math.min(Math.max(clusterGpus(p), 2 * now, 8), D.hint_limit),
        out = [];
      for (let v = 1; v <= limit; v++) out.push(v);
      return out;
    }
    const hi = Math.max(now - 1, 1),
      n = D.hint_limit,
      seen = new Set();
    for (let i = 0; i < n; i++) seen.add(roundHalfEven(n > 1 ? 1 + ((hi - 1) * i) / (n - 1) : 1));
    return [...seen].sort((a, b) => a - b);
  }
  function repairHint(c, ci, p) {
    // stepwall.model.compose.repair_hint: for a parallel degree or a workload size the
    // constraint names (the keys set on the page's controls first), a value at which every
    // constraint holds: the nearest degree (ties: the larger), the largest workload size
    // below the value now; no hint where none does
    const keys = c.keys.filter((k) => CTRL[k]).concat(c.keys.filter((k) => !CTRL[k]));
    for (const key of keys) {
      if (!(key.startsWith("parallel.") || key.startsWith("workload.")) || IDX[key] === undefined)
        continue;
      const now = Math.trunc(p[IDX[key]]),
        t = wholeTable(key, p);
      let best = null,
        bd = Infinity;
      for (const v of hintCandidates(key, now, p)) {
        if (!feasibleOut(wholeAt(t, v))) continue;
        const d = key.startsWith("parallel.") ? Math.abs(v - now) : -v;
        if (d <= bd) {
          best = v;
          bd = d;
        }
      }
      if (best !== null) return key + " = " + best + " satisfies every constraint";
    }
    return "";
  }
  function sideText(s, sv, blamed) {
    const v = sideValue(sv[s.j], s.unit);
    if (s.label) return s.label + " " + v;
    if (s.number || (s.symbol && s.symbol === blamed)) return v;
    return s.str + " = " + v;
  }
  function explain(t, sv, blamed) {
    if (t.k === "and")
      return t.parts
        .filter((q) => !sv[q.holds])
        .map((q) => explain(q.node, sv, blamed))
        .join(" and ");
    if (t.k === "or") return t.parts.map((q) => explain(q, sv, blamed)).join(" and ");
    if (t.k === "mod")
      return t.ranks_blamed
        ? sideValue(sv[t.ranks.j], t.ranks.unit) + " does not divide " + sideText(t.size, sv, "")
        : sideText(t.size, sv, blamed) + " is not a multiple of " + sideText(t.ranks, sv, "");
    if (t.k === "rel")
      return sideText(t.lhs, sv, blamed) + " " + t.op + " " + sideText(t.rhs, sv, "");
    return t.text;
  }
  function violations(ev, p) {
    const out = [];
    let sv = null;
    D.constraints.forEach((c, ci) => {
      if (ev.holds[ci]) return;
      sv = sv || SIDES(p);
      const blamed = c.keys.length ? c.keys[0] : "";
      const hint = repairHint(c, ci, p);
      const where = blamed || "plugin " + c.plugin;
      out.push({
        name: c.name,
        line: `${where}: ${explain(c.explain, sv, blamed)} (${c.message}${hint ? "; " + hint : ""})`,
      });
    });
    if (!out.length && !ev.feasible) {
      const bad = D.metrics.filter((m, i) => !OPTIONAL.has(m) && !Number.isFinite(ev.metrics[i]));
      out.push({
        name: "finite",
        line: `${D.scenario}: ${bad.join(", ")} is not finite (a parameter is zero or out of its physical range)`,
      });
    }
    return out;
  }

  // ---------------------------------------------------------------- the wall (derive's definition)
  const G = D.wall && D.wall.nodes ? D.wall.nodes : null;
  function graphPass(p, key, choice, record, dep, order) {
    const n = G.length,
      val = new Float64Array(n);
    const m = order ? order.length : n;
    for (let t = 0; t < m; t++) {
      const i = order ? order[t] : t;
      const nd = G[i],
        op = nd[0];
      let v;
      switch (op) {
        case "n":
          v = nd[1];
          break;
        case "p":
          v = p[nd[1]];
          break;
        case "+":
          v = 0;
          for (let j = 1; j < nd.length; j++) v += val[nd[j]];
          break;
        case "*":
          v = 1;
          for (let j = 1; j < nd.length; j++) v *= val[nd[j]];
          break;
        case "^":
          v = Math.pow(val[nd[1]], val[nd[2]]);
          break;
        case "min":
        case "max": {
          let k = choice[i];
          if (record) {
            let best = val[nd[1]];
            for (let j = 2; j < nd.length; j++) {
              const w = val[nd[j]];
              if (op === "min" ? w < best : w > best) best = w;
            }
            k = -1;
            for (let j = 1; j < nd.length; j++)
              if (val[nd[j]] === best && !dep[nd[j]]) {
                k = j;
                break;
              }
            if (k < 0)
              for (let j = 1; j < nd.length; j++)
                if (val[nd[j]] === best) {
                  k = j;
                  break;
                }
            if (k < 0) k = 1;
            choice[i] = k;
          }
          v = val[nd[k]];
          break;
        }
        case "pw": {
          let k = choice[i];
          if (record) {
            k = -1;
            for (let j = 1; j < nd.length; j += 2)
              if (val[nd[j + 1]]) {
                k = j;
                break;
              }
            choice[i] = k;
          }
          v = k < 0 ? NaN : val[nd[k]];
          break;
        }
        case "<":
          v = val[nd[1]] < val[nd[2]] ? 1 : 0;
          break;
        case "<=":
          v = val[nd[1]] <= val[nd[2]] ? 1 : 0;
          break;
        case ">":
          v = val[nd[1]] > val[nd[2]] ? 1 : 0;
          break;
        case ">=":
          v = val[nd[1]] >= val[nd[2]] ? 1 : 0;
          break;
        case "==":
          v = val[nd[1]] === val[nd[2]] ? 1 : 0;
          break;
        case "!=":
          v = val[nd[1]] !== val[nd[2]] ? 1 : 0;
          break;
        case "and":
          v = 1;
          for (let j = 1; j < nd.length; j++) if (!val[nd[j]]) v = 0;
          break;
        case "or":
          v = 0;
          for (let j = 1; j < nd.length; j++) if (val[nd[j]]) v = 1;
          break;
        case "not":
          v = val[nd[1]] ? 0 : 1;
          break;
        case "log":
          v = Math.log(val[nd[1]]);
          break;
        case "exp":
          v = Math.exp(val[nd[1]]);
          break;
        case "abs":
          v = Math.abs(val[nd[1]]);
          break;
        case "ceil":
          v = Math.ceil(val[nd[1]]);
          break;
        case "floor":
          v = Math.floor(val[nd[1]]);
          break;
        case "mod":
          v = pymod(val[nd[1]], val[nd[2]]);
          break;
        case "lambertw":
          v = lambertw(val[nd[1]], nd.length > 2 ? val[nd[2]] : 0);
          break;
        default:
          v = NaN;
      }
      val[i] = v;
    }
    return val;
  }
  function bisect(fn, a, b) {
    // stepwall.analyses.common.bisect
    let fa = fn(a);
    for (let it = 0; it < 200; it++) {
      const m = 0.5 * (a + b),
        fm = fn(m);
      if (fm > 0 === fa > 0) {
        a = m;
        fa = fm;
      } else b = m;
      if (b - a <= 1e-12 * Math.max(1, Math.abs(b))) break;
    }
    return 0.5 * (a + b);
  }
  function keyRange(path, x0) {
    // stepwall.analyses.common.key_range (whole-number keys)
    if (path.startsWith("parallel.")) return [1, Math.max(4 * clusterGpus(cur), 16 * x0)];
    if (path === D.users_key) return [1, Math.max(4096, 16 * x0)];
    return [1, Math.max(16 * x0, 16)];
  }
  function wall(path, p0, eps) {
    if (!G)
      return {
        why: `the step time uses ${D.wall && D.wall.unsupported}, which the page cannot resolve`,
      };
    const key = IDX[path],
      n = G.length,
      x0 = p0[key];
    const dep = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const nd = G[i];
      if (nd[0] === "p") dep[i] = nd[1] === key ? 1 : 0;
      else if (nd[0] !== "n")
        for (let j = 1; j < nd.length; j++)
          if (dep[nd[j]]) {
            dep[i] = 1;
            break;
          }
    }
    const choice = new Int32Array(n);
    const val0 = graphPass(p0, key, choice, true, dep, null);
    const rdep = new Uint8Array(n); // depends on the key once branches are resolved
    for (let i = 0; i < n; i++) {
      const nd = G[i],
        op = nd[0];
      if (op === "p") rdep[i] = dep[i];
      else if (op === "min" || op === "max" || op === "pw")
        rdep[i] = choice[i] > 0 ? rdep[nd[choice[i]]] : 0;
      else if (op !== "n")
        for (let j = 1; j < nd.length; j++)
          if (rdep[nd[j]]) {
            rdep[i] = 1;
            break;
          }
    }
    const memo = new Map();
    function collect(items) {
      const m = new Map();
      for (const [c, f] of items) {
        const s = f.slice().sort((a, b) => a - b),
          k = s.join(",");
        const had = m.get(k);
        if (had) had[0] += c;
        else m.set(k, [c, s]);
      }
      return [...m.values()].filter((t) => t[0] !== 0);
    }
    function addends(i) {
      // the resolved step time expanded: [coefficient, factor node ids]
      if (memo.has(i)) return memo.get(i);
      let out;
      const nd = G[i],
        op = nd[0];
      if (!rdep[i]) out = [[val0[i], []]];
      else if (op === "+") out = collect(nd.slice(1).flatMap(addends));
      else if (op === "*") {
        out = [[1, []]];
        for (let j = 1; j < nd.length && out; j++) {
          const next = [];
          for (const [c, f] of out)
            for (const [d, g] of addends(nd[j])) next.push([c * d, f.concat(g)]);
          out = next.length > 512 ? null : collect(next);
        }
        if (!out) out = [[1, [i]]];
      } else if (op === "min" || op === "max" || op === "pw") out = addends(nd[choice[i]]);
      else out = [[1, [i]]];
      memo.set(i, out);
      return out;
    }
    const root = n - 1;
    if (!rdep[root]) return { why: "the step time does not depend on " + path + " here: no wall" };
    const items = addends(root);
    // only the nodes the addends' factors need, through the branches taken, in order
    const need = new Uint8Array(n);
    const stack = items.flatMap((t) => t[1]);
    while (stack.length) {
      const i = stack.pop();
      if (need[i]) continue;
      need[i] = 1;
      const nd = G[i],
        op = nd[0];
      if (op === "min" || op === "max" || op === "pw") {
        if (choice[i] > 0) stack.push(nd[choice[i]]);
      } else if (op !== "n" && op !== "p") for (let j = 1; j < nd.length; j++) stack.push(nd[j]);
    }
    const order = [];
    for (let i = 0; i < n; i++) if (need[i]) order.push(i);
    const q = Float64Array.from(p0);
    const at = (x) => {
      q[key] = x;
      const v = graphPass(q, key, choice, false, dep, order);
      return items.map(([c, f]) => {
        let a = c;
        for (const j of f) a *= v[j];
        return a;
      });
    };
    const scale = Math.max(1, Math.abs(x0));
    const v0 = at(x0),
      v12 = at(1e12 * scale),
      v13 = at(1e13 * scale);
    // derive's test (stepwall.analyses.wall.freeze_growing), on addends of the expanded form:
    // larger at 10¹³ than at 10¹² and than now, and positive (a negative addend decaying to 0
    // does not grow without bound)
    const frozen = items.map(
      (_, j) => v13[j] > 0 && v13[j] > v12[j] * (1 + 1e-6) && v13[j] > v0[j],
    );
    const t = (x) => at(x).reduce((a, v, j) => a + (frozen[j] ? v0[j] : v), 0);
    const tinf = t(1e12 * scale);
    const nf = frozen.filter(Boolean).length;
    if (!Number.isFinite(tinf) || tinf <= 0)
      return { why: "t(∞) is not finite on this branch: no wall", frozen: nf };
    const g = (x) => t(x) / tinf - 1 - eps;
    const lo = Math.min(1e-6, x0 * 1e-6),
      hi = Math.max(1e9, x0 * 1e6);
    if (!(g(lo) > 0 && g(hi) < 0))
      return {
        why: "t does not fall below (1 + ε)·t(∞) as " + path + " grows: no wall",
        frozen: nf,
        tinf,
      };
    const value = bisect(g, lo, hi);
    const out = { value, tinf, frozen: nf, whole: null };
    const c = CTRL[path];
    if (c && c.dimensionless && Number.isInteger(x0)) {
      const [a, b] = keyRange(path, x0),
        t = wholeTable(path, p0);
      for (let x = Math.max(Math.ceil(value - 1e-9), Math.ceil(a)); x <= Math.floor(b); x++) {
        if (feasibleOut(wholeAt(t, x))) {
          out.whole = x;
          break;
        }
      }
      if (out.whole === null)
        out.note =
          Math.ceil(value - 1e-9) > Math.floor(b)
            ? `${path} ≥ ${pyG(value, 4)} is beyond the range scanned (1 to ${Math.floor(b)})`
            : `no whole ${path} from ${pyG(value, 4)} to ${Math.floor(b)} satisfies every constraint`;
    }
    return out;
  }

  // ---------------------------------------------------------------- controls
  function expOf(c) {
    return c.exp;
  }
  function siOf(text, c) {
    const s = text.trim();
    if (!s) return NaN;
    if (/^[+-]?(\d+\.?\d*|\.\d+)$/.test(s)) return Number(s + "e" + expOf(c));
    const v = Number(s);
    return c.exp ? v * Math.pow(10, c.exp) : v;
  }
  function shown(si, c) {
    const v = Number((si / Math.pow(10, c.exp)).toPrecision(12));
    return String(v);
  }
  function valid(v, c) {
    if (!Number.isFinite(v)) return false;
    if (c.integer && !Number.isInteger(v)) return false;
    if (c.inclusive ? v < c.min : v <= c.min) return false;
    if (c.max !== null && v > c.max) return false;
    return true;
  }
  function toPos(v, c) {
    const x = Math.min(Math.max(v, c.lo), c.hi);
    if (c.hi === c.lo) return 0;
    const f = c.log ? Math.log(x / c.lo) / Math.log(c.hi / c.lo) : (x - c.lo) / (c.hi - c.lo);
    return Math.round(f * 1000);
  }
  function fromPos(pos, c) {
    const f = pos / 1000;
    let v = c.log ? c.lo * Math.pow(c.hi / c.lo, f) : c.lo + f * (c.hi - c.lo);
    if (c.integer) return Math.round(v);
    const d = Number((v / Math.pow(10, c.exp)).toPrecision(4));
    return siOf(String(d), c);
  }
  function setControl(c, si, from) {
    const box = $(c.id),
      slider = $("slider-" + c.id.slice(8));
    if (from !== "box") box.value = shown(si, c);
    if (from !== "slider") slider.value = String(toPos(si, c));
    box.dataset.value = String(si);
    box.classList.remove("invalid");
    cur[IDX[c.path]] = si;
  }
  D.controls.forEach((c) => {
    const box = $(c.id),
      slider = $("slider-" + c.id.slice(8));
    slider.value = String(toPos(c.value, c));
    const onBox = () => {
      const v = siOf(box.value, c);
      if (!valid(v, c)) {
        box.classList.add("invalid");
        return;
      }
      setControl(c, v, "box");
      update();
    };
    box.addEventListener("input", onBox);
    box.addEventListener("change", onBox);
    slider.addEventListener("input", () => {
      setControl(c, fromPos(Number(slider.value), c), "slider");
      update();
    });
  });
  $("reset").addEventListener("click", () => {
    cur.set(SPEC);
    D.controls.forEach((c) => setControl(c, c.value, ""));
    update();
  });
  $("chart-metric").addEventListener("change", update);
  $("chart-key").addEventListener("change", update);

  // ---------------------------------------------------------------- the page
  // the large cards, four a row: the throughputs and the step time, then (after memory,
  // two wide) the GPUs and the time to first token
  const CARDS = [
    ["tokens_per_s_per_user", "tokens/s per user", "tokens/s"],
    ["tokens_per_s_per_gpu", "tokens/s per GPU", "tokens/s"],
    ["tokens_per_s", "tokens/s, all users", "tokens/s"],
    ["step_time_s", "step time", "s"],
    ["gpus", "GPUs", ""],
    ["ttft_s", "time to first token", "s"],
  ];
  const AFTER_MEMORY = 4; // the cards before the memory card
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function buildCards() {
    const box = $("metrics");
    const shown = new Set();
    const card = ([m, label]) => {
      if (MI[m] === undefined) return;
      shown.add(m);
      const c = el("div", { class: "card", title: (D.help && D.help[m]) || m });
      c.append(el("div", { class: "label" }, label), el("div", { class: "value", id: "metric-" + m }));
      box.append(c);
    };
    CARDS.slice(0, AFTER_MEMORY).forEach(card);
    const mem = el("div", { class: "card", id: "memory-card" });
    mem.append(
      el("div", { class: "label" }, "memory per GPU"),
      el("div", { class: "value", id: "metric-memory_bytes_per_gpu" }),
      el("div", { class: "membar", id: "membar" }),
      el("div", { class: "extra", id: "memory-extra" }),
    );
    for (const m of ["memory_capacity_per_gpu", "weight_bytes_per_gpu", "kv_bytes_per_gpu"]) {
      const s = el("span", { id: "metric-" + m, hidden: "" });
      mem.append(s);
      shown.add(m);
    }
    mem.append(el("span", { id: "metric-memory_fits", hidden: "" }));
    shown.add("memory_bytes_per_gpu");
    box.append(mem);
    CARDS.slice(AFTER_MEMORY).forEach(card);
    // the model's other metrics (time to first token, disaggregated serving, energy and
    // cost where the specs give them), small, in one row
    const rest = D.metrics.filter((m) => !shown.has(m));
    if (rest.length) {
      const more = el("div", { class: "card wide", id: "more-metrics" });
      for (const m of rest) {
        const item = el("div", { class: "mini", title: (D.help && D.help[m]) || m });
        item.append(
          el("div", { class: "label" }, D.labels[m] || m),
          el("div", { class: "value", id: "metric-" + m }),
        );
        more.append(item);
      }
      box.append(more);
    }
    // greyed where a constraint fails: the performance metrics (computed, not attainable);
    // the configuration ones (GPUs, memory) keep their meaning there
    const DIAG = new Set(D.diagnostic || []);
    for (const m of D.metrics) {
      const e = $("metric-" + m);
      if (e && !DIAG.has(m)) e.classList.add("perf");
    }
  }
  function buildBreakdown() {
    const bar = $("breakdown-bar"),
      legend = $("breakdown-legend");
    D.groups.forEach((g, i) => {
      const color = COLORS[g] || EXTRA[i % EXTRA.length];
      const seg = el("div", { class: "seg", id: "group-" + g });
      seg.style.background = color;
      bar.append(seg);
      const item = el("span", { id: "legend-" + g });
      const sw = el("i");
      sw.style.background = color;
      item.append(sw, el("span", { class: "txt" }));
      legend.append(item);
    });
    const body = $("terms-table").tBodies[0];
    D.terms.forEach((t) => {
      const tr = el("tr", { id: "term-" + t.name.replace(/\./g, "-"), title: t.why });
      tr.append(
        el("td", {}, t.name),
        el("td", {}, t.group + (t.overlap ? " (overlap " + t.overlap + ")" : "")),
        el("td", {}, t.plugin),
        el("td", { class: "num" }),
        el("td", { class: "num" }),
      );
      body.append(tr);
    });
    $("terms-details").querySelector("summary").textContent = "Terms (" + NT + ")";
  }
  function setValue(id, v, text) {
    const e = $(id);
    e.dataset.value = typeof v === "boolean" ? String(v) : String(v);
    if (text !== undefined) e.textContent = text;
  }
  function render(ev) {
    const m = (name) => ev.metrics[MI[name]];
    for (const [name, , unit] of CARDS) {
      if (MI[name] === undefined) continue;
      const e = $("metric-" + name),
        v = m(name);
      e.dataset.value = String(v);
      e.textContent = "";
      if (unit === "s") e.append(pretty(v, "s"));
      else {
        e.append(pretty(v, ""));
        if (unit) e.append(el("span", { class: "unit" }, unit));
      }
    }
    for (const name of D.metrics) {
      if (CARDS.some((c) => c[0] === name)) continue;
      const e = $("metric-" + name);
      if (!e) continue;
      e.dataset.value = String(m(name));
      if (!e.hidden) {
        const u = D.units[name] || "";
        e.textContent = "";
        if (u === "s" || u === "B") e.append(pretty(m(name), u));
        else {
          e.append(pretty(m(name), ""));
          if (u) e.append(el("span", { class: "unit" }, u));
        }
      }
    }
    const used = m("memory_bytes_per_gpu"),
      cap = m("memory_capacity_per_gpu");
    const fits = used <= cap;
    setValue("metric-memory_fits", fits);
    const mv = $("metric-memory_bytes_per_gpu");
    mv.textContent = "";
    mv.append(
      pretty(used, "B"),
      el(
        "span",
        { class: "unit " + (fits ? "fits" : "nofit") },
        (fits ? "fits in " : "exceeds ") + pretty(cap, "B"),
      ),
    );
    const w = m("weight_bytes_per_gpu"),
      kv = m("kv_bytes_per_gpu"),
      full = Math.max(cap, used);
    const mb = $("membar");
    mb.textContent = "";
    const s1 = el("span"),
      s2 = el("span");
    s1.style.width = (100 * w) / full + "%";
    s1.style.background = "#6b7280";
    s2.style.width = (100 * kv) / full + "%";
    s2.style.background = "#0e9384";
    mb.append(s1, s2);
    $("memory-extra").textContent = "weights " + pretty(w, "B") + " · KV cache " + pretty(kv, "B");
    // breakdown by group
    const groups = Object.create(null);
    D.groups.forEach((g) => {
      groups[g] = 0;
    });
    D.terms.forEach((t, i) => {
      groups[t.group] += ev.terms[i];
    });
    const total = D.groups.reduce((a, g) => a + groups[g], 0);
    D.groups.forEach((g) => {
      const seg = $("group-" + g),
        v = groups[g],
        share = total > 0 ? v / total : 0;
      seg.dataset.value = String(v);
      seg.style.width = 100 * Math.max(share, 0) + "%";
      seg.title = g + ": " + pretty(v, "s") + " (" + (100 * share).toFixed(1) + "%)";
      seg.textContent = share > 0.07 ? g : "";
      $("legend-" + g).querySelector(".txt").textContent = g + " " + pretty(v, "s");
    });
    const t = m("step_time_s");
    $("breakdown-total").textContent =
      Math.abs(total - t) > 1e-12 * Math.abs(t)
        ? `terms sum to ${pretty(total, "s")}; step ${pretty(t, "s")} (overlapped terms count once)`
        : "sum " + pretty(t, "s");
    D.terms.forEach((term, i) => {
      const tr = $("term-" + term.name.replace(/\./g, "-"));
      tr.dataset.value = String(ev.terms[i]);
      tr.cells[3].textContent = pretty(ev.terms[i], "s");
      tr.cells[4].textContent = ((100 * ev.terms[i]) / t).toFixed(1) + "%";
    });
    // constraints
    const bad = violations(ev, cur);
    const ul = $("violations");
    ul.textContent = "";
    for (const v of bad) {
      const li = el("li", { "data-constraint": v.name });
      li.append(
        el("span", { class: "c" }, v.name),
        document.createTextNode(" "),
        el("span", { class: "msg" }, v.line),
      );
      ul.append(li);
    }
    $("constraints-panel").classList.toggle("bad", bad.length > 0);
    $("constraints-status").textContent = bad.length
      ? bad.length + " of " + NC + " violated: the numbers are greyed (computed, not attainable)"
      : "all " + NC + " hold ✓";
    $("results").classList.toggle("infeasible", bad.length > 0);
    $("results").dataset.feasible = String(bad.length === 0);
    $("status").textContent = bad.length ? "Infeasible: " + bad.map((v) => v.name).join(", ") : "";
  }

  // ---------------------------------------------------------------- the chart
  function niceStep(span, n) {
    const raw = span / n,
      mag = Math.pow(10, Math.floor(Math.log10(raw))),
      f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  }
  function ticksLinear(a, b, n) {
    if (!(b > a)) return [a];
    const st = niceStep(b - a, n),
      out = [];
    for (let v = Math.ceil(a / st) * st; v <= b + st * 1e-9; v += st)
      out.push(Math.abs(v) < st * 1e-9 ? 0 : v);
    return out;
  }
  function ticksLog(a, b, integer) {
    const out = [];
    if (integer) {
      let k = Math.pow(2, Math.ceil(Math.log2(a)));
      const step = Math.max(1, Math.ceil(Math.log2(b / a) / 8));
      for (; k <= b * (1 + 1e-9); k *= Math.pow(2, step)) out.push(k);
      return out;
    }
    for (let e = Math.floor(Math.log10(a)); e <= Math.ceil(Math.log10(b)); e++)
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= a * (1 - 1e-9) && v <= b * (1 + 1e-9)) out.push(v);
      }
    if (out.length > 9)
      return out.filter((v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9);
    return out;
  }
  // which way a figure of merit is better: +1 larger (throughputs), -1 smaller (times,
  // energy, cost), from the metrics' declarations (stepwall.model.metrics)
  const BETTER = D.better || {};
  function label(v) {
    // an axis tick: short enough for the margin (2500, 25k, 1.5M; 0.25, 1e-05)
    const a = Math.abs(v);
    if (a >= 1e4 && a < 1e15)
      for (const [s, pre] of PREFIX) if (a >= s * 10) return pyG(v / s, 3) + pre;
    if (Number.isInteger(v) && a < 1e4) return String(v);
    return pyG(v, 3);
  }
  const UNIT = {
    step_time_s: [1e-3, "ms"],
    memory_bytes_per_gpu: [1e9, "GB"],
    weight_bytes_per_gpu: [1e9, "GB"],
    kv_bytes_per_gpu: [1e9, "GB"],
    ttft_s: [1e-3, "ms"],
    memory_capacity_per_gpu: [1e9, "GB"],
  };
  function esc(t) {
    return String(t)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }
  function svg(tag, attrs, text) {
    // markup: the chart is drawn as one string (one DOM update)
    let s = "<" + tag;
    for (const k in attrs) s += " " + k + '="' + esc(attrs[k]) + '"';
    return text === undefined ? s + "/>" : s + ">" + esc(text) + "</" + tag + ">";
  }
  let chartWidth = 0;
  function xsFor(c, lo, hi, x0) {
    // every whole value over a short range, else 241 points; the current value among them
    const xs = [];
    if (c.integer && hi - lo <= 400) {
      for (let x = Math.ceil(lo); x <= hi; x++) xs.push(x);
    } else {
      const n = 240;
      for (let i = 0; i <= n; i++) {
        const f = i / n;
        let x = c.log ? lo * Math.pow(hi / lo, f) : lo + f * (hi - lo);
        if (c.integer) x = Math.round(x);
        if (!xs.length || x !== xs[xs.length - 1]) xs.push(x);
      }
    }
    if (Number.isFinite(x0) && !xs.includes(x0)) {
      xs.push(x0);
      xs.sort((a, b) => a - b);
    }
    return xs;
  }
  function chart() {
    const metric = $("chart-metric").value,
      path = $("chart-key").value,
      c = CTRL[path];
    const box = $("chart"),
      note = $("chart-note");
    if (!chartWidth) chartWidth = box.clientWidth || 700;
    const W = Math.max(320, chartWidth),
      H = 250;
    box.setAttribute("viewBox", "0 0 " + W + " " + H);
    const parts = [],
      put = (x) => {
        parts.push(x);
      };
    const k = IDX[path],
      x0 = cur[k];
    const lo = Math.min(c.lo, x0),
      hi = Math.max(c.hi, x0);
    const xs = xsFor(c, lo, hi, x0),
      p = Float64Array.from(cur);
    const [ys, ok] = [[], []];
    const [scale, unit] = UNIT[metric] || [1, D.units[metric] || ""];
    const table = c.integer ? wholeTable(path, cur) : null;
    for (const x of xs) {
      let out;
      if (table && Number.isInteger(x) && x >= 0) out = wholeAt(table, x);
      else {
        p[k] = x;
        out = MODEL(p);
      }
      ys.push(out[MI[metric]] / scale);
      ok.push(feasibleOut(out));
    }
    const xsc = c.log && lo > 0;
    const now = MODEL(cur);
    const cap = metric === "memory_bytes_per_gpu" ? now[MI.memory_capacity_per_gpu] : null;
    const fin = ys.filter((v) => Number.isFinite(v));
    let ymin = Math.min(0, ...fin),
      ymax = Math.max(...fin, cap !== null && cap !== undefined ? cap / scale : -Infinity);
    if (!fin.length) {
      ymin = 0;
      ymax = 1;
    }
    if (!(ymax > ymin)) ymax = ymin + 1;
    ymax += 0.06 * (ymax - ymin);
    const L = 62,
      R = 16,
      Tp = 14,
      B = 36;
    const fx = (x) =>
      L + (W - L - R) * (xsc ? Math.log(x / lo) / Math.log(hi / lo) : (x - lo) / (hi - lo || 1));
    const fy = (y) => H - B - ((H - B - Tp) * (y - ymin)) / (ymax - ymin);
    for (const v of ticksLinear(ymin, ymax, 5)) {
      put(svg("line", { class: "grid", x1: L, x2: W - R, y1: fy(v), y2: fy(v) }));
      put(svg("text", { x: L - 6, y: fy(v) + 4, "text-anchor": "end" }, label(v)));
    }
    const xt = xsc ? ticksLog(lo, hi, c.integer) : ticksLinear(lo, hi, 7);
    for (const v of xt) {
      put(svg("line", { class: "grid", x1: fx(v), x2: fx(v), y1: Tp, y2: H - B }));
      put(
        svg(
          "text",
          { x: fx(v), y: H - B + 14, "text-anchor": "middle" },
          label(v / Math.pow(10, c.exp)),
        ),
      );
    }
    put(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    put(svg("line", { class: "axis", x1: L, x2: L, y1: Tp, y2: H - B }));
    put(
      svg(
        "text",
        { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" },
        path + (c.unit ? " [" + c.unit + "]" : "") + (xsc ? ", log scale" : ""),
      ),
    );
    put(
      svg(
        "text",
        {
          x: 12,
          y: (Tp + H - B) / 2,
          "text-anchor": "middle",
          transform: "rotate(-90 12 " + (Tp + H - B) / 2 + ")",
        },
        (D.labels[metric] || metric) + (unit ? " [" + unit + "]" : ""),
      ),
    );
    // the legend, under the plot at the right (the axis title is centred)
    const lx = W - R - 232,
      ly = H - 7;
    put(svg("line", { class: "curve", x1: lx, x2: lx + 18, y1: ly - 4, y2: ly - 4 }));
    put(svg("text", { x: lx + 22, y: ly }, "feasible"));
    put(svg("line", { class: "infeasible", x1: lx + 76, x2: lx + 94, y1: ly - 4, y2: ly - 4 }));
    put(svg("text", { x: lx + 98, y: ly }, "all points"));
    put(svg("circle", { class: "now", cx: lx + 170, cy: ly - 4, r: 4 }));
    put(svg("text", { x: lx + 178, y: ly }, "current"));
    // every point, grey and dashed; the feasible ones joined in blue, dotted when few
    let dAll = "",
      dOk = "",
      gap = true;
    const dots = [];
    xs.forEach((x, i) => {
      if (!Number.isFinite(ys[i])) {
        gap = true;
        return;
      }
      const pt = fx(x).toFixed(1) + "," + fy(ys[i]).toFixed(1);
      dAll += (gap ? "M" : "L") + pt;
      gap = false;
      if (ok[i]) {
        dOk += (dOk ? "L" : "M") + pt;
        dots.push([fx(x), fy(ys[i])]);
      }
    });
    if (dAll) put(svg("path", { class: "infeasible", d: dAll }));
    if (dOk) put(svg("path", { class: "curve", d: dOk }));
    if (dots.length <= 80)
      for (const [cx, cy] of dots)
        put(svg("circle", { class: "dot", cx: cx.toFixed(1), cy: cy.toFixed(1), r: 2.5 }));
    if (cap !== null && cap !== undefined) {
      put(
        svg("line", { class: "cap", x1: L, x2: W - R, y1: fy(cap / scale), y2: fy(cap / scale) }),
      );
      put(
        svg(
          "text",
          { class: "caplabel", x: W - R - 4, y: fy(cap / scale) - 4, "text-anchor": "end" },
          "usable " + pretty(cap, "B"),
        ),
      );
    }
    const yNow = now[MI[metric]] / scale;
    if (Number.isFinite(yNow))
      put(svg("circle", { class: "now", cx: fx(x0), cy: fy(yNow), r: 4.5 }));
    const mark = (x, text) => {
      if (!(x >= lo && x <= hi)) return false;
      put(svg("line", { class: "mark", x1: fx(x), x2: fx(x), y1: Tp, y2: H - B }));
      const right = fx(x) < W - 190;
      put(
        svg(
          "text",
          {
            class: "marklabel",
            x: fx(x) + (right ? 5 : -5),
            y: Tp + 12,
            "text-anchor": right ? "start" : "end",
          },
          text,
        ),
      );
      return true;
    };
    const shownX = (x) => pyG(x / Math.pow(10, c.exp), 4) + (c.unit ? " " + c.unit : "");
    const wl = $("wall"),
      opt = $("optimum");
    for (const e of [wl, opt]) {
      delete e.dataset.value;
      delete e.dataset.whole;
      e.textContent = "";
    }
    let text = "";
    note.title = "";
    if (metric === "step_time_s") {
      const r = wall(path, cur, D.eps);
      wl.dataset.key = path;
      if (r.value !== undefined) {
        wl.dataset.value = String(r.value);
        const hasWhole = r.whole !== null && r.whole !== undefined;
        if (hasWhole) wl.dataset.whole = String(r.whole);
        const whole = hasWhole
          ? `; first whole ${path} ≥ it where every constraint holds: ${r.whole}`
          : r.note
            ? `; ${r.note}`
            : "";
        const held = r.frozen ? `; ${r.frozen} growing addend(s) held at the current value` : "";
        const inside = mark(r.value, "wall " + shownX(r.value));
        text =
          `Wall: ${path} = ${shownX(r.value)}, where t(N)/t(∞) − 1 < ${D.eps}` +
          ` (t(∞) = ${pretty(r.tinf, "s")}${held})${whole}` +
          (inside ? "." : "; outside the plotted range.");
      } else text = `Wall: none (${r.why}).`;
      note.title =
        `As stepwall derive SCENARIO wall ${path} --eps ${D.eps}: the smallest N with` +
        " t(N)/t(∞) − 1 < ε, ceilings relaxed, branches held at the current value, by" +
        " bisection in this page. See “How this page computes” below.";
    } else if (BETTER[metric]) {
      const most = BETTER[metric] > 0; // throughputs: the largest; times, costs: the smallest
      let best = -1;
      ys.forEach((y, i) => {
        if (ok[i] && Number.isFinite(y) && (best < 0 || (most ? y > ys[best] : y < ys[best])))
          best = i;
      });
      if (best >= 0) {
        opt.dataset.value = String(xs[best]);
        opt.dataset.metric = String(ys[best] * scale);
        const inside = mark(xs[best], (most ? "max" : "min") + " at " + shownX(xs[best]));
        const value = pyG(ys[best], 4) + (unit ? " " + unit : "");
        text =
          `Optimum: ${D.labels[metric] || metric} is ${most ? "largest" : "smallest"} at ` +
          `${path} = ${shownX(xs[best])} (${value})` +
          (inside ? "." : ", outside the plot.");
        note.title =
          `The ${most ? "maximum" : "minimum"} over the ${xs.length} plotted points where ` +
          "every constraint holds, the other parameters at the controls' values.";
      } else text = "Optimum: no plotted point satisfies every constraint.";
    } else {
      const capNote = cap !== null ? "; the dotted line is the usable capacity." : ".";
      text = `${D.labels[metric] || metric} against ${path}${capNote}`;
    }
    note.textContent = text;
    box.innerHTML = parts.join("");
  }

  // ---------------------------------------------------------------- update
  function update() {
    const t0 = performance.now();
    const ev = evaluate(cur);
    render(ev);
    chart();
    timing.update = performance.now() - t0;
    timing.updates += 1;
  }
  buildCards();
  buildBreakdown();
  const notes = el("span", { id: "wall", hidden: "" }),
    opt = el("span", { id: "optimum", hidden: "" });
  $("chart-panel").append(notes, opt);
  update();
  timing.ready = performance.now() - T0;
  requestAnimationFrame(() =>
    requestAnimationFrame(() => {
      timing.firstPaint = performance.now();
    }),
  );
  window.addEventListener("resize", () => {
    chartWidth = 0;
    chart();
  });
  // for tools and tests: the state, the evaluator, and each control's SI unit (as --set takes it)
  window.stepwallExplorer = {
    evaluate,
    wall,
    cur,
    update,
    render,
    chart,
    controls: D.controls,
    siUnit: (path) => CTRL[path].si_unit,
  };
})();
