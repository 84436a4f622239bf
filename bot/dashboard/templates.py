"""The dashboard's HTML: Jinja templates rendered with Flask's autoescaping. Data only, no logic.

- `BODY`: one run (header, waves, the A/B table per platform, the inline-SVG chart); also what
  `/runs/<id>.json` returns as `html`, which the open page swaps in.
- `PAGE`: the document around a body: a strict CSP with a per-response nonce for the one inline
  style and script, no external assets; the script polls the JSON while the run is not final.
- `LIST`: the runs a viewer may see.
"""
from __future__ import annotations

BODY = """
<header>
  <h1>run <code>{{ v.run_id }}</code> <small>{{ v.repo }}</small></h1>
  <p class="facts">
    <span class="badge s-{{ v.state }}" id="state">{{ v.state }}</span>
    phase <b id="phase">{{ v.phase }}</b> ·
    experiments <b id="progress">{{ v.done }}/{{ v.total }}</b> ·
    cost so far <b id="cost">{{ '%.2f' % v.cost_usd }} USD</b> ·
    base <code>{{ v.base_commit }}</code> · primary metric <b>{{ v.primary }}</b>
    {% if v.pr_url %} · <a href="{{ v.pr_url }}" rel="noreferrer">pull request</a>{% endif %}
  </p>
  {% if v.message %}<p class="msg">{{ v.message }}</p>{% endif %}
</header>
<section>
  <h2>Waves <small>({{ v.parallel }} experiment(s) at a time per platform)</small></h2>
  <ol class="waves">
  {% for w in v.waves %}<li class="w-{{ w.status }}">wave {{ w.n }}: {{ w.experiments|join(', ') }} — {{ w.status }}</li>
  {% else %}<li>no experiments planned yet (research)</li>{% endfor %}
  </ol>
</section>
<section>
  <h2>Experiments (A/B per platform)</h2>
  <table id="experiments">
    <thead><tr><th>experiment</th>{% for p in v.platforms %}<th>{{ p }}</th>{% endfor %}</tr></thead>
    <tbody>
    {% if v.calibration %}<tr class="cal"><td>calibration (A/A)</td>{% for p in v.platforms %}<td>
      {% set c = v.calibration.get(p) %}{% if c %}floor {{ '%.2f' % c.floor_pct if c.floor_pct is not none else '?' }} %, up to {{ c.repeats }} pairs{% else %}pending{% endif %}
    </td>{% endfor %}</tr>{% endif %}
    {% for e in v.experiments %}
      <tr data-name="{{ e.name }}"><td><b>{{ e.name }}</b>{% if e.title %}<br><small>{{ e.title }}</small>{% endif %}</td>
      {% for p in v.platforms %}{% set c = e.cells[p] %}
        <td class="cell"><span class="badge s-{{ c.status }}">{{ c.status }}</span>
        {% if c.delta_pct is not none %} <b>{{ '%+.1f' % c.delta_pct }} %</b>
          {% if c.ci_low_pct is not none and c.ci_high_pct is not none %}<small>[{{ '%+.1f' % c.ci_low_pct }}, {{ '%+.1f' % c.ci_high_pct }}]</small>{% endif %}
          {% if c.p_value is not none %}<small>p={{ '%.3g' % c.p_value }}</small>{% endif %}
          {% if c.base_mean is not none and c.head_mean is not none %}<br><small>A {{ '%.4g' % c.base_mean }} → B {{ '%.4g' % c.head_mean }}</small>{% endif %}
        {% endif %}
        {% if c.reason and c.status != 'keep' %}<br><small class="reason">{{ c.reason }}</small>{% endif %}
        </td>
      {% endfor %}</tr>
    {% endfor %}
    {% if v.stacks %}<tr class="stack"><td><b>stack</b> (kept changes together)</td>{% for p in v.platforms %}{% set c = v.stacks.get(p) %}
      <td>{% if c %}<span class="badge s-{{ c.status }}">{{ c.status }}</span>{% if c.delta_pct is not none %} <b>{{ '%+.1f' % c.delta_pct }} %</b>{% endif %}{% else %}pending{% endif %}</td>{% endfor %}</tr>{% endif %}
    </tbody>
  </table>
</section>
<section>
  <h2>{{ ch.primary }}: change vs baseline per experiment</h2>
  {% if ch.bars %}
  <svg id="chart" role="img" aria-label="{{ ch.primary }} change against the baseline" width="{{ ch.width }}" height="{{ ch.height }}" viewBox="0 0 {{ ch.width }} {{ ch.height }}">
    {% for t in ch.ticks %}<line x1="{{ t.x }}" x2="{{ t.x }}" y1="16" y2="{{ ch.axis_y }}" stroke="#ddd"/>
    <text x="{{ t.x }}" y="{{ ch.axis_y + 16 }}" text-anchor="middle" font-size="11" fill="#555">{{ '%+g' % t.v }}%</text>{% endfor %}
    <line x1="{{ ch.zero }}" x2="{{ ch.zero }}" y1="12" y2="{{ ch.axis_y }}" stroke="#333" stroke-width="1.5"/>
    <text x="{{ ch.zero }}" y="10" text-anchor="middle" font-size="11" fill="#333">baseline</text>
    {% for b in ch.bars %}
      <text x="{{ ch.left - 8 }}" y="{{ b.y + 15 }}" text-anchor="end" font-size="12" fill="#222">{{ b.label }}</text>
      <rect class="bar s-{{ b.status }}" x="{{ b.x }}" y="{{ b.y + 4 }}" width="{{ b.w }}" height="16" rx="2"/>
      {% if b.ci %}<line x1="{{ b.ci[0] }}" x2="{{ b.ci[1] }}" y1="{{ b.y + 12 }}" y2="{{ b.y + 12 }}" stroke="#222"/>{% endif %}
      <text x="{{ b.tx }}" y="{{ b.y + 16 }}" text-anchor="{{ b.anchor }}" font-size="11" fill="#222">{{ '%+.1f' % b.delta }}%</text>
    {% endfor %}
  </svg>
  {% else %}<p>no measured experiments yet</p>{% endif %}
</section>
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>autoresearch · {{ title }}</title>
<style nonce="{{ nonce }}">
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1f2328;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h1 small{font-weight:normal;color:#656d76;font-size:14px}
h2{font-size:15px;margin:22px 0 8px} h2 small{font-weight:normal;color:#656d76}
table{border-collapse:collapse;width:100%} th,td{border:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} tr.cal td{background:#fbfbfb;color:#555} tr.stack td{background:#f3fbf5}
.badge{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;background:#eaeef2}
.s-keep,.s-done{background:#dafbe1} .s-discard{background:#eaeef2} .s-pending,.s-queued,.s-awaiting_approval{background:#fff8c5}
.s-running,.s-experiments,.s-calibrate,.s-research,.s-stack{background:#ddf4ff}
.s-crash,.s-build_failed,.s-checks_failed,.s-timeout,.s-failed,.s-noise,.s-invalid{background:#ffebe9} .s-skipped,.s-cancelled{background:#f6f8fa}
rect.bar{fill:#8c959f} rect.s-keep{fill:#2da44e} rect.s-discard{fill:#8c959f} rect.s-noise{fill:#d4a72c} rect.s-invalid{fill:#cf222e}
.w-running{font-weight:bold} .w-done{color:#1a7f37} .reason{color:#656d76} .msg{background:#f6f8fa;padding:6px 8px}
footer{margin-top:24px;color:#656d76;font-size:12px}
</style></head>
<body>
<main id="run" data-src="{{ src }}" data-version="{{ version }}" data-final="{{ 'true' if final else 'false' }}">{{ body|safe }}</main>
<footer>read-only · {% if live %}<span id="live">live: refreshes while the run goes</span> · {% endif %}updated <span id="updated">{{ updated }}</span> · signed in as {{ user }}</footer>
{% if live %}<script nonce="{{ nonce }}">
(function () {
  var main = document.getElementById('run');
  var version = main.dataset.version, src = main.dataset.src;
  window.__autoresearchPolls = 0;
  function tick() {
    fetch(src, {credentials: 'same-origin', cache: 'no-store'}).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (d) {
      window.__autoresearchPolls += 1;
      if (d.version !== version) {
        version = d.version; main.innerHTML = d.html; main.dataset.version = d.version;
        document.getElementById('updated').textContent = new Date().toISOString();
      }
      if (d.final) { document.getElementById('live').textContent = 'finished'; return; }
      setTimeout(tick, {{ poll_ms }});
    }).catch(function () { setTimeout(tick, {{ poll_ms * 2 }}); });
  }
  if (main.dataset.final !== 'true') setTimeout(tick, {{ poll_ms }});
})();
</script>{% endif %}
</body></html>
"""

LIST = """
<h1>autoresearch runs</h1>
<table id="runs"><thead><tr><th>run</th><th>repository</th><th>state</th><th>phase</th><th>experiments</th><th>cost so far</th></tr></thead>
<tbody>{% for v in runs %}<tr><td><a href="{{ v.href }}">{{ v.run_id }}</a></td><td>{{ v.repo }}</td>
<td><span class="badge s-{{ v.state }}">{{ v.state }}</span></td><td>{{ v.phase }}</td><td>{{ v.done }}/{{ v.total }}</td>
<td>{{ '%.2f' % v.cost_usd }} USD</td></tr>{% else %}<tr><td colspan="6">no runs you may see</td></tr>{% endfor %}</tbody></table>
"""
