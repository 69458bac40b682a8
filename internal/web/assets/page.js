// tokentap's live comparison page: polls the admin API's stats endpoint
// (relative URL, so the page works wherever it is mounted, normally
// /tokentap/) and renders the comparison table and the distribution charts,
// and, for two rows the user picks, their fair comparison (stats/compare).
//
// Plain JavaScript with no dependencies and no build step: the page is
// served from the binary, offline, under a Content-Security-Policy that
// allows only its own files. Everything from the API is written with
// textContent or SVG attributes, never as HTML: model names and label values
// come from client requests, and this page runs on the admin API's origin.
(() => {
	'use strict';

	const params = new URLSearchParams(location.search);

	// The windows the stats API keeps, with their length in seconds.
	const WINDOWS = { '1m': 60, '5m': 300, '1h': 3600, '24h': 86400 };
	const DEFAULT_WINDOW = '5m';

	// The refresh period, in seconds: every 3 s by default; ?refresh=N
	// changes it (tests use a short one), bounded so a typo cannot hammer
	// the admin API or freeze the page.
	const refreshSeconds = clamp(Number.parseFloat(params.get('refresh')) || 3, 0.2, 60);
	// A stats request that takes longer than this is given up and shown as
	// an error, so a hung admin API cannot leave the page silently stale.
	const FETCH_TIMEOUT_MS = 10000;

	const DASH = '\u2013'; // what a missing value shows
	const NNBSP = '\u202f'; // between a number and its unit, so they never wrap apart

	// Okabe-Ito, without its yellow (too pale on white): colours that stay
	// distinct for the common kinds of colour blindness.
	const PALETTE = ['#0072b2', '#e69f00', '#009e73', '#d55e00', '#cc79a7', '#56b4e9', '#7f6a00', '#6e6e6e'];

	// metric reads quantile q of one of a row's metrics, or null when the
	// metric saw no values (the API then sends count 0 and no quantiles).
	const metric = (name, q) => (row) => {
		const m = row.metrics && row.metrics[name];
		if (!m || !(m.count > 0)) return null;
		return finite(m[q]);
	};

	// Column groups of the table header's first row.
	const GROUPS = {
		ttft: 'Time to first token',
		ttfvt: 'First visible',
		tps: 'Output tokens/s',
		tpot: 'Per token',
		dur: 'Duration',
		tok: 'Tokens p50',
		cost: 'Cost (USD)',
		slo: 'SLO',
		usage: 'Usage check',
		rl: 'Rate limit left',
	};

	// COLUMNS drives the table header, the cells, sorting and the data-col
	// names the tests read. type "text" sorts ascending first; numbers
	// descending first, since the interesting end of most columns is the
	// top.
	const COLUMNS = [
		{ key: 'provider', label: 'Provider', type: 'text', get: (r) => str(r.provider) },
		{ key: 'model', label: 'Model', type: 'text', get: (r) => str(r.model) },
		{ key: 'labels', label: 'Labels', type: 'text', get: (r) => labelText(r.labels) },
		{ key: 'health', label: 'Health', type: 'text', get: (r) => healthText(r), title: 'Whether the model is slower than its own earlier requests: ok, slow, or – until it has enough of them' },
		{ key: 'requests', label: 'Requests', get: (r) => finite(r.requests), fmt: fmtCount, title: 'Requests that finished in the window' },
		{ key: 'error_rate', label: 'Errors', get: (r) => finite(r.error_rate), fmt: fmtPercent, title: 'Share of requests that ended in an upstream error' },
		{ key: 'abort_rate', label: 'Aborts', get: (r) => finite(r.abort_rate), fmt: fmtPercent, title: 'Share of requests the client aborted' },
		{ key: 'throttled_rate', label: 'Throttled', get: (r) => finite(r.throttled_rate), fmt: fmtPercent, title: 'Share of requests the provider throttled (429, overloaded), counted apart from errors' },
		{ key: 'estimated_share', label: 'Estimated', get: (r) => finite(r.estimated_share), fmt: fmtPercent, title: 'Share of requests whose token counts were estimated because the provider reported none' },
		{ key: 'buffered', label: 'Buffered', get: (r) => finite(r.buffered), fmt: fmtCount, title: 'Streams that arrived held back and released in one burst at their end: their time to first token is the whole generation' },
		{ key: 'ttft_p50', group: 'ttft', label: 'p50', get: metric('time_to_first_token', 'p50'), fmt: fmtSeconds },
		{ key: 'ttft_p95', group: 'ttft', label: 'p95', get: metric('time_to_first_token', 'p95'), fmt: fmtSeconds },
		{ key: 'ttfvt_p50', group: 'ttfvt', label: 'p50', get: metric('time_to_first_visible_token', 'p50'), fmt: fmtSeconds, title: 'Time to the first token of answer text (not reasoning)' },
		{ key: 'tps_p50', group: 'tps', label: 'p50', get: metric('output_tokens_per_second', 'p50'), fmt: fmtRate },
		{ key: 'tps_p95', group: 'tps', label: 'p95', get: metric('output_tokens_per_second', 'p95'), fmt: fmtRate, title: 'The fast end: 5% of requests were faster' },
		{ key: 'tps_p5', group: 'tps', label: 'p5', get: metric('output_tokens_per_second', 'p5'), fmt: fmtRate, title: 'The slow tail: 5% of requests were slower' },
		{ key: 'tpot_p50', group: 'tpot', label: 'p50', get: metric('time_per_output_token', 'p50'), fmt: fmtSeconds, title: 'Time per output token after the first' },
		{ key: 'duration_p50', group: 'dur', label: 'p50', get: metric('duration', 'p50'), fmt: fmtSeconds },
		{ key: 'duration_p95', group: 'dur', label: 'p95', get: metric('duration', 'p95'), fmt: fmtSeconds },
		{ key: 'input_tokens_p50', group: 'tok', label: 'in', get: metric('input_tokens', 'p50'), fmt: fmtTokens, title: 'Input tokens per request (cached included)' },
		{ key: 'output_tokens_p50', group: 'tok', label: 'out', get: metric('output_tokens', 'p50'), fmt: fmtTokens, title: 'Output tokens per request' },
		{ key: 'cost_p50', group: 'cost', label: 'p50', get: metric('cost', 'p50'), fmt: fmtUSD, title: 'Cost per request, of the requests whose model has a price' },
		{ key: 'cost_p95', group: 'cost', label: 'p95', get: metric('cost', 'p95'), fmt: fmtUSD, title: 'Cost per request: 5% of requests cost more' },
		{ key: 'cost_usd', group: 'cost', label: 'total', get: totalCost, fmt: fmtUSD, title: 'What the requests with a price cost in the window' },
		{ key: 'slo_attainment', group: 'slo', label: 'met', get: (r) => (r.slo ? finite(r.slo.attainment) : null), fmt: fmtPercent, title: 'Share of the requests judged that met the objective configured for the model' },
		{ key: 'slo_goodput', group: 'slo', label: 'goodput', get: (r) => (r.slo ? finite(r.slo.token_goodput) : null), fmt: fmtRate, title: 'Token goodput: output tokens per second of the window from the requests that met the objective' },
		{ key: 'usage_ratio', group: 'usage', label: 'ratio', get: (r) => (r.usage_check ? finite(r.usage_check.ratio) : null), fmt: (v) => fixed(v, 3), title: 'verify_usage: the output tokens the provider reported over those its text holds, summed over the requests verified; 1 when it counts what it sent' },
		{ key: 'usage_mismatches', group: 'usage', label: 'mismatches', get: (r) => (r.usage_check ? finite(r.usage_check.mismatches) : null), fmt: fmtCount, title: 'verify_usage: requests whose reported output differed from the count of their text beyond the tolerance' },
		{ key: 'rl_requests', group: 'rl', label: 'req', get: rateLimitShare('requests'), fmt: fmtPercent, title: "Remaining share of the provider's request limit, as its latest response reported it" },
		{ key: 'rl_tokens', group: 'rl', label: 'tok', get: rateLimitShare('tokens'), fmt: fmtPercent, title: "Remaining share of the provider's token limit (the tighter of input and output where it reports them apart), as its latest response reported it" },
		{ key: 'rl_reset', group: 'rl', label: 'reset', get: rateLimitReset, fmt: fmtSeconds, title: 'When the tighter limit is whole again, counted from the response that reported it' },
	];
	// rateLimitShare reads the remaining share of one of a row's limits, or
	// null when its responses reported none.
	function rateLimitShare(kind) {
		return (r) => (r.rate_limit && r.rate_limit[kind] ? finite(r.rate_limit[kind].remaining_share) : null);
	}

	// rateLimitReset is the reset of the row's tighter limit: the one with
	// the lower remaining share, else the later reset (as `tokentap stats`
	// shows it).
	function rateLimitReset(r) {
		const rl = r.rate_limit;
		if (!rl) return null;
		let best = null;
		for (const k of [rl.requests, rl.tokens]) {
			if (!k || finite(k.reset_seconds) === null) continue;
			const share = finite(k.remaining_share);
			const bestShare = best && finite(best.remaining_share);
			if (best === null) best = k;
			else if (share !== null && bestShare !== null) {
				if (share < bestShare) best = k;
			} else if (k.reset_seconds > best.reset_seconds) best = k;
		}
		return best ? finite(best.reset_seconds) : null;
	}
	// healthText is a row's health state as shown: ok, slow, or '' while
	// the row has too few requests to judge.
	function healthText(r) {
		const s = r.health && str(r.health.state);
		return s === 'ok' || s === 'slow' ? s : '';
	}

	// totalCost is the row's cost_usd, or null when no request of the row
	// had a price (a cost of 0 would claim it was free).
	function totalCost(row) {
		const m = row.metrics && row.metrics.cost;
		if (!m || !(m.count > 0)) return null;
		return finite(row.cost_usd);
	}
	const COLUMN = new Map(COLUMNS.map((c) => [c.key, c]));

	// The two charts: one distribution per model on a shared axis.
	const CHARTS = [
		{ id: 'chart-ttft', metric: 'time_to_first_token', fmt: fmtSeconds, what: 'time to first token' },
		{ id: 'chart-tps', metric: 'output_tokens_per_second', fmt: fmtRate, what: 'output tokens per second' },
	];

	// The over-time charts: p50 (solid) and p95 (dashed) of each model per
	// time slice of the window.
	const SERIES_CHARTS = [
		{ id: 'series-ttft', metric: 'time_to_first_token', fmt: fmtSeconds, what: 'time to first token' },
		{ id: 'series-tps', metric: 'output_tokens_per_second', fmt: fmtRate, what: 'output tokens per second' },
	];

	// The under-load charts: p50 and p95 of each model by in-flight level.
	const INFLIGHT_CHARTS = [
		{ id: 'inflight-ttft', metric: 'time_to_first_token', fmt: fmtSeconds, what: 'time to first token' },
		{ id: 'inflight-tps', metric: 'output_tokens_per_second', fmt: fmtRate, what: 'output tokens per second' },
	];

	const el = {
		body: document.body,
		status: document.getElementById('status'),
		message: document.getElementById('message'),
		banner: document.getElementById('health-banner'),
		live: document.getElementById('live'),
		liveBody: document.querySelector('#live-table tbody'),
		table: document.getElementById('comparison'),
		thead: document.querySelector('#comparison thead'),
		tbody: document.querySelector('#comparison tbody'),
		title: document.getElementById('table-title'),
		raw: document.getElementById('raw-link'),
		windows: document.querySelectorAll('input[name="window"]'),
		compare: document.getElementById('compare'),
		compareA: document.getElementById('compare-a'),
		compareB: document.getElementById('compare-b'),
		compareMessage: document.getElementById('compare-message'),
		compareResult: document.getElementById('compare-result'),
		compareSides: document.getElementById('compare-sides'),
	};

	const state = {
		window: Object.hasOwn(WINDOWS, params.get('window')) ? params.get('window') : DEFAULT_WINDOW,
		sort: { key: 'tps_p50', dir: 'desc' },
		rows: [],
		live: [], // requests in flight when the answer was made
		windowSeconds: 0,
		loaded: null, // Date of the last good answer
		loads: 0, // good answers so far, for tests waiting for a refresh
		seq: 0, // the latest request; older answers are dropped
		timer: 0,
		colours: new Map(), // row key -> palette index, stable across refreshes and sorts
		// The comparison of two rows: their selectors (kept in the
		// address as a and b), the last answer and the latest request.
		compare: { a: params.get('a') || '', b: params.get('b') || '', data: null, seq: 0, loads: 0, choices: '' },
	};

	// ---- formatting ----

	function finite(v) {
		return typeof v === 'number' && Number.isFinite(v) ? v : null;
	}

	function str(v) {
		return typeof v === 'string' ? v : '';
	}

	function clamp(v, lo, hi) {
		return Math.min(hi, Math.max(lo, v));
	}

	function fixed(v, digits) {
		return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
	}

	// fmtSeconds shows a duration in the unit a person reads fastest:
	// microseconds for per-token times on fast local models, milliseconds
	// below a second, seconds above.
	function fmtSeconds(s) {
		if (s < 0.001) return fixed(s * 1e6, 0) + NNBSP + 'µs';
		if (s < 0.01) return fixed(s * 1e3, 1) + NNBSP + 'ms';
		if (s < 1) return fixed(s * 1e3, 0) + NNBSP + 'ms';
		if (s < 10) return fixed(s, 2) + NNBSP + 's';
		if (s < 100) return fixed(s, 1) + NNBSP + 's';
		return fixed(s, 0) + NNBSP + 's';
	}

	function fmtRate(v) {
		return fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0) + NNBSP + 'tok/s';
	}

	// Token counts are whole, but their quantiles come from a sketch that
	// answers within its relative accuracy, so they are rounded back.
	function fmtTokens(v) {
		return fixed(Math.round(v), 0) + NNBSP + 'tok';
	}

	// fmtUSD shows three significant digits below a dollar (a request costs
	// a few thousandths or millionths), cents from a dollar up; the CLI's
	// formatUSD does the same.
	function fmtUSD(v) {
		if (v >= 1 || v <= 0) return '$' + fixed(v, 2);
		const decimals = Math.min(Math.max(2, 2 - Math.floor(Math.log10(v))), 9);
		return '$' + fixed(v, decimals);
	}

	function fmtCount(v) {
		return fixed(v, 0);
	}

	function fmtPercent(v) {
		if (v === 0) return '0' + NNBSP + '%';
		if (v < 0.001) return '<0.1' + NNBSP + '%';
		return fixed(v * 100, 1) + NNBSP + '%';
	}

	function fmtTime(d) {
		return d.toLocaleTimeString('en-GB', { hour12: false });
	}

	// describeWindow turns window_seconds into words for headings.
	function describeWindow(seconds) {
		if (seconds >= 3600 && seconds % 3600 === 0) return seconds === 3600 ? 'hour' : seconds / 3600 + ' hours';
		if (seconds >= 60 && seconds % 60 === 0) return seconds === 60 ? 'minute' : seconds / 60 + ' minutes';
		return seconds + ' seconds';
	}

	// labelText is the canonical form of a row's labels, sorted by name:
	// shown in the table and carried in data-labels.
	function labelText(labels) {
		if (!labels || typeof labels !== 'object') return '';
		return Object.keys(labels)
			.sort()
			.map((k) => k + '=' + labels[k])
			.join(', ');
	}

	function rowKey(r) {
		return [str(r.provider), str(r.model), labelText(r.labels)].join('\u0000');
	}

	function colourOf(r) {
		const key = rowKey(r);
		if (!state.colours.has(key)) state.colours.set(key, state.colours.size);
		return PALETTE[state.colours.get(key) % PALETTE.length];
	}

	// ---- sorting ----

	// sortedRows orders rows by the chosen column. Missing values go last
	// whichever the direction, and ties fall back to provider, model and
	// labels so the order does not flicker between refreshes.
	function sortedRows() {
		const col = COLUMN.get(state.sort.key) || COLUMN.get('tps_p50');
		const sign = state.sort.dir === 'asc' ? 1 : -1;
		const keyed = state.rows.map((r) => ({ r, v: col.get(r), k: rowKey(r) }));
		keyed.sort((a, b) => {
			const am = a.v === null || a.v === '';
			const bm = b.v === null || b.v === '';
			if (am !== bm) return am ? 1 : -1;
			if (!am) {
				const c = col.type === 'text' ? a.v.localeCompare(b.v) : a.v - b.v;
				if (c !== 0) return sign * c;
			}
			return a.k < b.k ? -1 : a.k > b.k ? 1 : 0;
		});
		return keyed.map((x) => x.r);
	}

	function setSort(key) {
		const col = COLUMN.get(key);
		if (!col) return;
		if (state.sort.key === key) {
			state.sort.dir = state.sort.dir === 'asc' ? 'desc' : 'asc';
		} else {
			state.sort = { key, dir: col.type === 'text' ? 'asc' : 'desc' };
		}
		render();
	}

	// ---- table ----

	function buildHeader() {
		const top = document.createElement('tr');
		const sub = document.createElement('tr');
		let group = null;
		for (const col of COLUMNS) {
			const th = headerCell(col);
			if (!col.group) {
				th.rowSpan = 2;
				top.append(th);
				group = null;
				continue;
			}
			if (col.group !== group) {
				group = col.group;
				const g = document.createElement('th');
				g.scope = 'colgroup';
				g.className = 'group';
				g.dataset.group = group;
				g.colSpan = COLUMNS.filter((c) => c.group === group).length;
				g.textContent = GROUPS[group];
				top.append(g);
				th.classList.add('group-start');
			}
			sub.append(th);
		}
		el.thead.replaceChildren(top, sub);
	}

	function headerCell(col) {
		const th = document.createElement('th');
		th.scope = 'col';
		th.dataset.col = col.key;
		th.dataset.type = col.type || 'num';
		const button = document.createElement('button');
		button.type = 'button';
		button.dataset.col = col.key;
		if (col.group) {
			// "p50" alone is ambiguous to a screen reader reading one
			// heading; the group's name goes first, unseen.
			const hidden = document.createElement('span');
			hidden.className = 'visually-hidden';
			hidden.textContent = GROUPS[col.group] + ' ';
			button.append(hidden);
		}
		button.append(col.label);
		if (col.title) button.title = col.title;
		button.addEventListener('click', () => setSort(col.key));
		th.append(button);
		return th;
	}

	function renderTable(rows) {
		for (const th of el.thead.querySelectorAll('th[data-col]')) {
			if (th.dataset.col === state.sort.key) {
				th.setAttribute('aria-sort', state.sort.dir === 'asc' ? 'ascending' : 'descending');
			} else {
				th.removeAttribute('aria-sort');
			}
		}
		const hasLabels = rows.some((r) => labelText(r.labels) !== '');
		el.table.classList.toggle('no-labels', !hasLabels);
		// Without prices configured, no row has a cost: the columns go.
		const hasCost = rows.some((r) => totalCost(r) !== null);
		el.table.classList.toggle('no-cost', !hasCost);
		el.table.classList.toggle('no-slo', !rows.some((r) => r.slo));
		el.table.classList.toggle('no-usage', !rows.some((r) => r.usage_check));
		el.table.classList.toggle('no-rl', !rows.some((r) => r.rate_limit));

		const trs = rows.map((r) => {
			const tr = document.createElement('tr');
			tr.dataset.provider = str(r.provider);
			tr.dataset.model = str(r.model);
			tr.dataset.labels = labelText(r.labels);
			if (r.overflow) {
				tr.dataset.overflow = 'true';
				tr.classList.add('overflow');
			}
			for (const col of COLUMNS) tr.append(cell(col, r));
			return tr;
		});
		el.tbody.replaceChildren(...trs);
	}

	function cell(col, r) {
		const v = col.get(r);
		const td = document.createElement(col.key === 'model' ? 'th' : 'td');
		if (col.key === 'model') td.scope = 'row';
		td.dataset.col = col.key;
		td.dataset.type = col.type || 'num';
		if (col.group && COLUMNS.find((c) => c.group === col.group) === col) td.classList.add('group-start');
		if (col.type === 'text') {
			td.dataset.value = v;
			td.classList.add(col.key);
			if (col.key === 'model') {
				const sw = document.createElement('span');
				sw.className = 'swatch';
				sw.style.background = colourOf(r);
				sw.setAttribute('aria-hidden', 'true');
				td.append(sw, v || DASH);
				if (r.overflow) td.title = 'Every row over the cap on distinct rows, merged';
				else td.title = v;
			} else {
				td.textContent = v || (col.key === 'health' ? DASH : '');
				td.title = col.key === 'health' && r.health ? str(r.health.reason) : v;
				if (col.key === 'health' && v === 'slow') td.classList.add('slow');
			}
			return td;
		}
		if (v === null) {
			td.dataset.value = '';
			td.textContent = DASH;
			td.classList.add('missing');
		} else {
			td.dataset.value = String(v);
			td.textContent = col.fmt(v);
			if (col.key === 'buffered' && v > 0) td.classList.add('buffered');
		}
		return td;
	}

	// ---- charts ----

	const SVG = 'http://www.w3.org/2000/svg';

	function svgEl(name, attrs, text) {
		const e = document.createElementNS(SVG, name);
		for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
		if (text !== undefined) e.textContent = text;
		return e;
	}

	// niceStep picks an axis step of 1, 2 or 5 times a power of ten, so
	// that about `count` ticks span `max`.
	function niceStep(max, count) {
		const raw = max / Math.max(1, count);
		const mag = 10 ** Math.floor(Math.log10(raw));
		const f = raw / mag;
		return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
	}

	// trimZeros drops the zeros a tick label does not need ("1.50 s" ->
	// "1.5 s", "50.0 tok/s" -> "50 tok/s"); ticks are round numbers.
	function trimZeros(label) {
		return label.replace(/(\.\d*?)0+(?=\D|$)/, '$1').replace(/\.(?=\D|$)/, '');
	}

	function quantiles(r, name) {
		const m = r.metrics && r.metrics[name];
		if (!m || !(m.count > 0)) return null;
		const q = { count: m.count, p5: finite(m.p5), p50: finite(m.p50), p90: finite(m.p90), p95: finite(m.p95), p99: finite(m.p99) };
		return q.p50 === null ? null : q;
	}

	function renderChart(spec, rows) {
		const svg = document.getElementById(spec.id);
		if (!svg) return;
		const width = Math.max(320, Math.round(svg.parentElement.clientWidth || 600));
		const labelW = Math.min(220, Math.round(width * 0.3));
		const valueW = 92;
		const x0 = labelW + 8;
		const x1 = width - valueW;
		const rowH = 24;
		const top = 4;
		const axisH = 22;
		const data = rows.map((r) => ({ r, q: quantiles(r, spec.metric) }));
		const height = top + Math.max(1, data.length) * rowH + axisH;
		svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
		svg.setAttribute('height', String(height));
		const parts = [];

		const withData = data.filter((d) => d.q);
		if (withData.length === 0) {
			parts.push(svgEl('text', { x: 0, y: top + 16, class: 'nodata' }, 'No ' + spec.what + ' measured in this window yet.'));
			svg.replaceChildren(svgEl('title', {}, 'No data yet'), ...parts);
			return;
		}

		let max = 0;
		for (const d of withData) max = Math.max(max, d.q.p99 ?? d.q.p95 ?? d.q.p50);
		if (!(max > 0)) max = 1;
		const step = niceStep(max, Math.max(2, Math.floor((x1 - x0) / 90)));
		const axisMax = Math.ceil(max / step) * step;
		const x = (v) => x0 + ((x1 - x0) * clamp(v, 0, axisMax)) / axisMax;
		const yAxis = top + data.length * rowH;

		for (let i = 0; i * step <= axisMax + step / 2; i++) {
			const t = i * step; // not a running sum, whose rounding errors add up
			parts.push(svgEl('line', { class: 'grid', x1: x(t), x2: x(t), y1: top, y2: yAxis }));
			parts.push(svgEl('text', { class: 'axis', x: x(t), y: yAxis + 15, 'text-anchor': 'middle' }, t === 0 ? '0' : trimZeros(spec.fmt(t))));
		}

		const summary = [];
		data.forEach((d, i) => {
			const y = top + i * rowH + rowH / 2;
			const name = str(d.r.model) + (labelText(d.r.labels) ? ' (' + labelText(d.r.labels) + ')' : '');
			const g = svgEl('g', { 'data-model': str(d.r.model), 'data-labels': labelText(d.r.labels) });
			const maxChars = Math.max(6, Math.floor(labelW / 7));
			const shown = name.length > maxChars ? name.slice(0, maxChars - 1) + '…' : name;
			g.append(svgEl('text', { x: 0, y: y + 4 }, shown));
			if (!d.q) {
				g.append(svgEl('text', { class: 'nodata', x: x0, y: y + 4 }, 'no data'));
				g.append(svgEl('title', {}, name + ': no data'));
				parts.push(g);
				return;
			}
			const q = d.q;
			const lo = q.p5 ?? q.p50;
			const hi = q.p99 ?? q.p95 ?? q.p50;
			const p95 = q.p95 ?? q.p50;
			const colour = colourOf(d.r);
			g.append(svgEl('line', { class: 'whisker', x1: x(lo), x2: x(hi), y1: y, y2: y }));
			g.append(svgEl('rect', { class: 'box', x: x(q.p50), y: y - 7, width: Math.max(2, x(p95) - x(q.p50)), height: 14, fill: colour }));
			g.append(svgEl('line', { class: 'median', x1: x(q.p50), x2: x(q.p50), y1: y - 9, y2: y + 9 }));
			g.append(svgEl('text', { class: 'value', x: x1 + 8, y: y + 4 }, 'p50 ' + spec.fmt(q.p50)));
			const detail = ['p5', 'p50', 'p90', 'p95', 'p99']
				.filter((k) => q[k] !== null)
				.map((k) => k + ' ' + spec.fmt(q[k]))
				.join(', ');
			g.append(svgEl('title', {}, name + ': ' + detail + ' (' + q.count + ' requests)'));
			summary.push(name + ' p50 ' + spec.fmt(q.p50));
			parts.push(g);
		});
		svg.replaceChildren(svgEl('title', {}, 'Distribution of ' + spec.what + ' per model: ' + summary.join('; ')), ...parts);
	}

	// fmtClock shows a slice's start as the hour and minute (and second,
	// for windows of seconds) in the reader's time zone.
	function fmtClock(ms, seconds) {
		const d = new Date(ms);
		const opts = { hour: '2-digit', minute: '2-digit', hour12: false };
		if (seconds < 60) opts.second = '2-digit';
		return d.toLocaleTimeString('en-GB', opts);
	}

	// lineFrame sizes svg for a line chart with axisH pixels under the
	// plot for the x axis, and returns the plot's edges.
	function lineFrame(svg, axisH) {
		const width = Math.max(320, Math.round(svg.parentElement.clientWidth || 600));
		const height = 220;
		svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
		svg.setAttribute('height', String(height));
		return { width, left: 64, right: width - 150, top: 8, bottom: height - axisH };
	}

	function noData(svg, f, text) {
		svg.replaceChildren(svgEl('title', {}, 'No data yet'), svgEl('text', { x: 0, y: f.top + 16, class: 'nodata' }, text));
	}

	// plotLines draws the value axis, from 0 to a round number over max,
	// then each line: {r, q, pts: [{x, v}]}, x in pixels, v null for a
	// gap that breaks the line. p50 is solid and p95 dashed, and each line
	// is labelled at its last point with its quantile and model, so that
	// neither rests on colour alone. It returns the chart's parts and each
	// line's g, to which the caller adds its tooltip.
	function plotLines(spec, f, lines, max) {
		if (!(max > 0)) max = 1;
		const step = niceStep(max, 4);
		const yMax = Math.ceil(max / step) * step;
		const y = (v) => f.bottom - ((f.bottom - f.top) * clamp(v, 0, yMax)) / yMax;
		const parts = [];
		for (let i = 0; i * step <= yMax + step / 2; i++) {
			const v = i * step;
			parts.push(svgEl('line', { class: 'grid', x1: f.left, x2: f.right, y1: y(v), y2: y(v) }));
			parts.push(svgEl('text', { class: 'axis', x: f.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, v === 0 ? '0' : trimZeros(spec.fmt(v))));
		}
		const labels = [];
		const groups = lines.map((line) => {
			const name = str(line.r.model) + (labelText(line.r.labels) ? ' (' + labelText(line.r.labels) + ')' : '');
			const g = svgEl('g', { 'data-model': str(line.r.model), 'data-labels': labelText(line.r.labels), 'data-quantile': line.q });
			let d = '';
			let pen = false;
			let last = null;
			for (const p of line.pts) {
				if (p.v === null || !Number.isFinite(p.x)) {
					pen = false;
					continue;
				}
				d += (pen ? 'L' : 'M') + p.x.toFixed(1) + ' ' + y(p.v).toFixed(1);
				pen = true;
				last = p;
				g.append(svgEl('circle', { class: 'point', cx: p.x, cy: y(p.v), r: 2.5, fill: colourOf(line.r) }));
			}
			g.prepend(svgEl('path', { class: 'series ' + line.q, d, stroke: colourOf(line.r) }));
			if (last) {
				const label = svgEl('text', { class: 'series-label', x: f.right + 6, y: y(last.v) + 4 }, fitLabel(line.q + ' ' + name, f.width - f.right - 8));
				labels.push({ y: y(last.v) + 4, label });
				g.append(label);
			}
			parts.push(g);
			return { g, name, last };
		});
		// Lines that end close together would print their labels over one
		// another.
		spreadLabels(labels);
		return { parts, groups };
	}

	// renderSeries draws each model's p50 and p95 over the window's
	// slices, each point in the middle of its slice; a slice without a
	// value breaks the line.
	function renderSeries(spec, rows) {
		const svg = document.getElementById(spec.id);
		if (!svg) return;
		const f = lineFrame(svg, 24);
		const lines = [];
		let t0 = Infinity;
		let t1 = -Infinity;
		let max = 0;
		let slices = 1;
		for (const r of rows) {
			if (!Array.isArray(r.series)) continue;
			slices = Math.max(slices, r.series.length);
			for (const q of ['p50', 'p95']) {
				const pts = r.series.map((p) => {
					const t = Date.parse(p.start);
					const m = p.metrics && p.metrics[spec.metric];
					const v = m && m.count > 0 ? finite(m[q]) : null;
					if (Number.isFinite(t)) {
						t0 = Math.min(t0, t);
						t1 = Math.max(t1, t + 1000 * (finite(p.seconds) || 0));
					}
					if (v !== null) max = Math.max(max, v);
					return { t, v };
				});
				if (pts.some((p) => p.v !== null)) lines.push({ r, q, pts });
			}
		}
		if (lines.length === 0 || !(t1 > t0)) {
			noData(svg, f, 'No ' + spec.what + ' measured in this window yet.');
			return;
		}
		const x = (t) => f.left + ((f.right - f.left) * (t - t0)) / (t1 - t0);
		const half = (t1 - t0) / slices / 2;
		for (const line of lines) {
			for (const p of line.pts) p.x = x(p.t + half);
		}
		const { parts, groups } = plotLines(spec, f, lines, max);
		const ticks = 4;
		for (let i = 0; i <= ticks; i++) {
			const t = t0 + ((t1 - t0) * i) / ticks;
			parts.push(svgEl('text', { class: 'axis', x: x(t), y: f.bottom + 16, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' },
				fmtClock(t, state.windowSeconds / slices)));
		}
		const summary = [];
		groups.forEach(({ g, name, last }, i) => {
			const line = lines[i];
			g.append(svgEl('title', {}, name + ' ' + line.q + ': ' + line.pts.filter((p) => p.v !== null).map((p) => fmtClock(p.t, 60) + ' ' + spec.fmt(p.v)).join(', ')));
			if (last) summary.push(name + ' ' + line.q + ' latest ' + spec.fmt(last.v));
		});
		svg.replaceChildren(svgEl('title', {}, spec.what + ' over time, per model: ' + summary.join('; ')), ...parts);
	}

	// inflightText writes a bucket as 1, 2–3 or 64+.
	function inflightText(p) {
		const lo = finite(p.inflight_min);
		const hi = finite(p.inflight_max);
		if (hi === null) return lo + '+';
		return hi === lo ? String(lo) : lo + '\u2013' + hi;
	}

	// renderInflight draws each model's p50 and p95 by in-flight bucket,
	// the buckets evenly spaced since each doubles the last.
	function renderInflight(spec, rows) {
		const svg = document.getElementById(spec.id);
		if (!svg) return;
		const f = lineFrame(svg, 40);
		const buckets = new Map(); // inflight_min -> label
		let max = 0;
		const lines = [];
		for (const r of rows) {
			if (!Array.isArray(r.by_inflight)) continue;
			for (const q of ['p50', 'p95']) {
				const pts = [];
				for (const p of r.by_inflight) {
					const lo = finite(p.inflight_min);
					const m = p.metrics && p.metrics[spec.metric];
					const v = m && m.count > 0 ? finite(m[q]) : null;
					if (lo === null || v === null) continue;
					buckets.set(lo, inflightText(p));
					max = Math.max(max, v);
					pts.push({ lo, v, n: finite(p.requests) });
				}
				if (pts.length) lines.push({ r, q, pts });
			}
		}
		if (lines.length === 0) {
			noData(svg, f, 'No ' + spec.what + ' by requests in flight in this window yet.');
			return;
		}
		const order = [...buckets.keys()].sort((a, b) => a - b);
		const slot = (f.right - f.left) / Math.max(1, order.length);
		const x = (lo) => f.left + slot * (order.indexOf(lo) + 0.5);
		for (const line of lines) {
			for (const p of line.pts) p.x = x(p.lo);
		}
		const { parts, groups } = plotLines(spec, f, lines, max);
		for (const lo of order) {
			parts.push(svgEl('text', { class: 'axis', x: x(lo), y: f.bottom + 16, 'text-anchor': 'middle' }, buckets.get(lo)));
		}
		parts.push(svgEl('text', { class: 'axis', x: (f.left + f.right) / 2, y: f.bottom + 32, 'text-anchor': 'middle' }, 'requests in flight to the model'));
		const summary = [];
		groups.forEach(({ g, name }, i) => {
			const line = lines[i];
			g.append(svgEl('title', {}, name + ' ' + line.q + ': ' + line.pts.map((p) => buckets.get(p.lo) + ' in flight ' + spec.fmt(p.v) + ' (' + p.n + ' requests)').join(', ')));
			summary.push(name + ' ' + line.q + ' ' + line.pts.map((p) => buckets.get(p.lo) + ': ' + spec.fmt(p.v)).join(', '));
		});
		svg.replaceChildren(svgEl('title', {}, spec.what + ' by requests in flight, per model: ' + summary.join('; ')), ...parts);
	}

	// fitLabel cuts text to about px pixels of the 11 px label font, with
	// an ellipsis; the full name is in the line's tooltip.
	function fitLabel(text, px) {
		const chars = Math.max(8, Math.floor(px / 6.2));
		return text.length > chars ? text.slice(0, chars - 1) + '\u2026' : text;
	}

	// spreadLabels keeps line labels that would overlap at least a line
	// of text apart.
	function spreadLabels(labels) {
		labels.sort((a, b) => a.y - b.y);
		let floor = -Infinity;
		for (const l of labels) {
			l.y = Math.max(l.y, floor + 13);
			floor = l.y;
			l.label.setAttribute('y', l.y.toFixed(1));
		}
	}

	// ---- comparing two rows ----

	// The windows that keep strata, and so can compare (stats.HasStrata).
	const STRATA_WINDOWS = new Set(['5m', '1h']);

	// The comparison's two panels: per metric, which side of 1 is B faster.
	const COMPARE_METRICS = [
		{ id: 'compare-ttft', metric: 'time_to_first_token', what: 'time to first token', lowerIsBetter: true },
		{ id: 'compare-tps', metric: 'output_tokens_per_second', what: 'output tokens/s', lowerIsBetter: false },
	];
	const COMPARE_QUANTILES = ['p50', 'p95'];
	// The quantile the cell grids show: p95 seldom has enough requests per
	// cell; its ratios are in each cell's tooltip.
	const CELL_QUANTILE = 'p50';

	// rowSelector is the selector (stats.ParseSelector) that picks the row:
	// its provider, model and every label. null for a row no selector can
	// name: the overflow row, and names holding a comma, a label name
	// holding "=", or spaces the selector's terms would trim.
	function rowSelector(r) {
		if (r.overflow || !str(r.model) || !str(r.provider)) return null;
		const labels = r.labels && typeof r.labels === 'object' ? r.labels : {};
		const parts = [['provider', str(r.provider)], ['model', str(r.model)]];
		for (const k of Object.keys(labels).sort()) {
			if (!k || k.includes('=')) return null;
			parts.push(['label:' + k, str(labels[k])]);
		}
		for (const [name, value] of parts) {
			if (!value || (name + value).includes(',') || (name + '=' + value).trim() !== name + '=' + value) return null;
		}
		return parts.map(([name, value]) => name + '=' + value).join(',');
	}

	// rowName is a row as the choices and the comparison name it.
	function rowName(r) {
		const l = labelText(r.labels);
		return str(r.model) + (l ? ' (' + l + ')' : '') + ' \u00b7 ' + str(r.provider);
	}

	// renderCompareChoices offers the current rows in both selects, in a
	// fixed order (not the table's, which moves with every refresh), keeping
	// each choice. A choice from the address that no row matches stays,
	// marked, so a shared link still says what it compares. The options are
	// rebuilt only when they change, so an open select stays open.
	function renderCompareChoices() {
		const options = [];
		const seen = new Set();
		for (const r of state.rows) {
			const sel = rowSelector(r);
			if (sel === null || seen.has(sel)) continue;
			seen.add(sel);
			options.push({ sel, name: rowName(r), key: rowKey(r) });
		}
		options.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
		for (const v of [state.compare.a, state.compare.b]) {
			if (v && !seen.has(v)) {
				seen.add(v);
				options.push({ sel: v, name: v + ' (no such row in this window)' });
			}
		}
		const sig = JSON.stringify(options.map((o) => [o.sel, o.name]));
		if (sig === state.compare.choices) return;
		state.compare.choices = sig;
		for (const [select, value] of [[el.compareA, state.compare.a], [el.compareB, state.compare.b]]) {
			const none = document.createElement('option');
			none.value = '';
			none.textContent = 'choose a row\u2026';
			select.replaceChildren(none, ...options.map((o) => {
				const opt = document.createElement('option');
				opt.value = o.sel;
				opt.textContent = o.name;
				return opt;
			}));
			select.value = value;
		}
	}

	function setCompare(side, value) {
		state.compare[side] = value;
		const url = new URL(location.href);
		if (value) url.searchParams.set(side, value);
		else url.searchParams.delete(side);
		history.replaceState(null, '', url);
		loadCompare();
	}

	// compareState shows a message in place of the comparison: kind is the
	// section's data-state (pick, same, window, loading, error).
	function compareState(kind, text) {
		el.compare.dataset.state = kind;
		el.compareMessage.textContent = text;
		el.compareMessage.hidden = !text;
		el.compareMessage.dataset.kind = kind;
		if (kind !== 'loading') {
			el.compareResult.hidden = true;
			state.compare.data = null;
		}
	}

	// loadCompare asks for the comparison of the chosen rows in the current
	// window, with its cells; the page's refresh calls it after each good
	// stats answer.
	async function loadCompare() {
		const c = state.compare;
		const seq = ++c.seq;
		if (!c.a || !c.b) {
			compareState('pick', 'Choose a row as A and one as B to compare them on the conditions both saw.');
			return;
		}
		if (c.a === c.b) {
			compareState('same', 'A and B are the same row: choose two different rows.');
			return;
		}
		if (!STRATA_WINDOWS.has(state.window)) {
			compareState('window', 'The last ' + describeWindow(WINDOWS[state.window]) + ' keeps no strata, so it cannot compare fairly: choose 5 min or 1 hour.');
			return;
		}
		if (!c.data) compareState('loading', 'Comparing\u2026');
		const ctl = new AbortController();
		const timeout = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
		let data = null;
		let error = '';
		try {
			const q = 'a=' + encodeURIComponent(c.a) + '&b=' + encodeURIComponent(c.b) + '&window=' + encodeURIComponent(state.window) + '&cells=true';
			const resp = await fetch('stats/compare?' + q, { cache: 'no-store', headers: { Accept: 'application/json' }, signal: ctl.signal });
			const text = await resp.text();
			if (!resp.ok) throw new Error('HTTP ' + resp.status + apiMessage(text));
			try {
				data = JSON.parse(text);
			} catch {
				throw new Error('the answer is not JSON');
			}
			if (!data || typeof data !== 'object' || !Array.isArray(data.metrics)) throw new Error('the answer is not a comparison (no metrics)');
			if (data.version !== 1) throw new Error('the answer is comparison version ' + data.version + ', and this page reads version 1');
		} catch (err) {
			data = null;
			if (err.name === 'AbortError') error = 'no answer within ' + FETCH_TIMEOUT_MS / 1000 + NNBSP + 's';
			else if (err instanceof TypeError) error = 'the admin API is unreachable (' + err.message + ')';
			else error = err.message;
		} finally {
			clearTimeout(timeout);
		}
		if (seq !== c.seq) return; // a newer choice or refresh took over
		if (!data) {
			compareState('error', 'Cannot compare: ' + error + '.');
			return;
		}
		c.data = data;
		c.loads++;
		el.compare.dataset.loads = String(c.loads);
		el.compare.dataset.state = 'ok';
		el.compareMessage.hidden = true;
		el.compareMessage.textContent = '';
		el.compareResult.hidden = false;
		renderCompare();
	}

	function renderCompare() {
		const data = state.compare.data;
		if (!data) return;
		const side = (name, s) => {
			const span = document.createElement('span');
			span.className = 'compare-side';
			span.dataset.side = name;
			const rows = Array.isArray(s.rows) ? s.rows : [];
			const b = document.createElement('strong');
			b.textContent = name + ': ';
			const sw = document.createElement('span');
			sw.className = 'swatch';
			sw.setAttribute('aria-hidden', 'true');
			if (rows.length === 1) sw.style.background = colourOf(rows[0]);
			span.append(b, sw, rows.length === 1 ? rowName(rows[0]) : str(s.selector) + ' (' + rows.length + ' rows)',
				', ' + fmtCount(finite(s.requests) || 0) + ' requests, ' + fmtCount(finite(s.stratified) || 0) + ' with a cell');
			return span;
		};
		el.compareSides.replaceChildren(side('A', data.a || {}), ' \u00b7 ', side('B', data.b || {}),
			' \u00b7 over the last ' + describeWindow(finite(data.window_seconds) || WINDOWS[state.window]));
		for (const spec of COMPARE_METRICS) {
			const metrics = COMPARE_QUANTILES.map((q) => data.metrics.find((m) => m && m.metric === spec.metric && m.quantile === q) || null);
			renderRatios(spec, metrics);
			renderCompareTable(spec, metrics);
			renderCells(spec, Array.isArray(data.cells) ? data.cells : []);
		}
	}

	// interval reads a {ratio, low, high}, or null.
	function interval(v) {
		if (!v || typeof v !== 'object') return null;
		const r = { ratio: finite(v.ratio), low: finite(v.low), high: finite(v.high) };
		return r.ratio > 0 && r.low > 0 && r.high > 0 ? r : null;
	}

	// verdict reads an interval: B faster or slower when the whole 95 %
	// interval is on one side of 1, else no clear difference.
	function verdict(spec, iv) {
		if (!iv) return '';
		const below = iv.high < 1;
		const above = iv.low > 1;
		if (!below && !above) return 'no clear difference';
		return below === spec.lowerIsBetter ? 'faster' : 'slower';
	}

	const VERDICT_COLOUR = { faster: '#0072b2', slower: '#d55e00', 'no clear difference': '#6e6e6e' };

	// fmtRatio shows a ratio to three significant digits.
	function fmtRatio(v) {
		if (v >= 1000) return fixed(v, 0);
		return String(Number(v.toPrecision(3)));
	}

	// ratioTicks picks the axis's ticks: 1 and round ratios and their
	// inverses up to the axis's end, at least minPx apart.
	function ratioTicks(limit, x, minPx) {
		const round = [1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000].filter((v) => v <= limit * 1.0001);
		const ticks = [1];
		const fits = (v) => ticks.every((t) => Math.abs(x(t) - x(v)) >= minPx);
		for (const v of [...round].reverse()) {
			for (const t of [v, 1 / v]) if (fits(t)) ticks.push(t);
		}
		return ticks.sort((a, b) => a - b);
	}

	// renderRatios draws each quantile's fair ratio with its 95 % interval
	// and the naive ratio, on a log axis symmetric about 1, the side where
	// B is faster labelled.
	function renderRatios(spec, metrics) {
		const svg = document.getElementById(spec.id);
		if (!svg) return;
		const width = Math.max(320, Math.round(svg.parentElement.clientWidth || 600));
		const labelW = 34;
		const valueW = 132;
		const x0 = labelW + 4;
		const x1 = width - valueW;
		const top = 18;
		const rowH = 24;
		const axisH = 18;
		const height = top + COMPARE_QUANTILES.length * rowH + axisH;
		svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
		svg.setAttribute('height', String(height));

		let extent = Math.log(1.25);
		for (const m of metrics) {
			if (!m) continue;
			const iv = interval(m.fair);
			const naive = finite(m.naive);
			for (const v of [iv && iv.low, iv && iv.high, naive]) if (v > 0) extent = Math.max(extent, Math.abs(Math.log(v)));
		}
		const limit = [1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000].find((v) => Math.log(v) >= extent * 1.05) || Math.exp(extent * 1.05);
		const mid = (x0 + x1) / 2;
		const x = (v) => mid + ((x1 - x0) / 2) * clamp(Math.log(v) / Math.log(limit), -1, 1);
		const yAxis = top + COMPARE_QUANTILES.length * rowH;
		const parts = [];
		const fasterLeft = spec.lowerIsBetter;
		parts.push(svgEl('text', { class: 'side', x: x0, y: 11, 'text-anchor': 'start' }, '\u2190 B ' + (fasterLeft ? 'faster' : 'slower')));
		parts.push(svgEl('text', { class: 'side', x: x1, y: 11, 'text-anchor': 'end' }, 'B ' + (fasterLeft ? 'slower' : 'faster') + ' \u2192'));
		for (const t of ratioTicks(limit, x, 34)) {
			parts.push(svgEl('line', { class: t === 1 ? 'one' : 'grid', x1: x(t), x2: x(t), y1: top - 2, y2: yAxis }));
			parts.push(svgEl('text', { class: 'axis', x: x(t), y: yAxis + 13, 'text-anchor': 'middle' }, t < 1 ? String(Number(t.toPrecision(2))) : fmtRatio(t)));
		}
		const summary = [];
		metrics.forEach((m, i) => {
			const q = COMPARE_QUANTILES[i];
			const y = top + i * rowH + rowH / 2;
			const g = svgEl('g', { 'data-quantile': q });
			g.append(svgEl('text', { x: 0, y: y + 4 }, q));
			const iv = m && interval(m.fair);
			const naive = m ? finite(m.naive) : null;
			if (!iv) {
				const why = m && str(m.not_comparable) ? 'not comparable: ' + str(m.not_comparable) : 'not comparable';
				g.dataset.notComparable = why;
				g.append(svgEl('text', { class: 'nodata', x: x0 + 4, y: y + 4 }, why));
				g.append(svgEl('title', {}, spec.what + ' ' + q + ': ' + why));
				summary.push(q + ' ' + why);
				parts.push(g);
				return;
			}
			const v = verdict(spec, iv);
			g.dataset.fair = String(iv.ratio);
			g.dataset.low = String(iv.low);
			g.dataset.high = String(iv.high);
			g.dataset.verdict = v;
			if (naive !== null && naive > 0) {
				g.dataset.naive = String(naive);
				// How far the conditions moved the naive ratio from the fair one.
				g.append(svgEl('line', { class: 'shift', x1: x(naive), x2: x(iv.ratio), y1: y, y2: y }));
			}
			g.append(svgEl('rect', { class: 'fair', x: x(iv.low), y: y - 5, width: Math.max(2, x(iv.high) - x(iv.low)), height: 10, fill: VERDICT_COLOUR[v] }));
			g.append(svgEl('line', { class: 'fair-mid', x1: x(iv.ratio), x2: x(iv.ratio), y1: y - 8, y2: y + 8 }));
			if (naive !== null && naive > 0) {
				const nx = x(naive);
				g.append(svgEl('path', { class: 'naive', d: `M${nx.toFixed(1)} ${y - 6} L${(nx + 6).toFixed(1)} ${y} L${nx.toFixed(1)} ${y + 6} L${(nx - 6).toFixed(1)} ${y} Z` }));
			}
			const text = fmtRatio(iv.ratio) + (naive !== null ? ' \u00b7 naive ' + fmtRatio(naive) : '');
			g.append(svgEl('text', { class: 'value', x: x1 + 10, y: y + 4 }, text));
			const line = q + ': B/A ' + fmtRatio(iv.ratio) + ' (95 % ' + fmtRatio(iv.low) + '\u2013' + fmtRatio(iv.high) + '), B ' + v +
				(naive !== null ? '; naive ' + fmtRatio(naive) : '');
			g.append(svgEl('title', {}, spec.what + ' ' + line));
			summary.push(line);
			parts.push(g);
		});
		svg.setAttribute('aria-label', spec.what + ', B over A on a log scale (' + (fasterLeft ? 'below' : 'above') + ' 1: B faster): ' + summary.join('; '));
		svg.replaceChildren(...parts);
	}

	function renderCompareTable(spec, metrics) {
		const tbody = document.querySelector('#' + spec.id + '-table tbody');
		if (!tbody) return;
		tbody.replaceChildren(...metrics.map((m, i) => {
			const tr = document.createElement('tr');
			tr.dataset.quantile = COMPARE_QUANTILES[i];
			const td = (col, text, value) => {
				const c = document.createElement('td');
				c.dataset.col = col;
				c.textContent = text;
				if (value !== undefined) c.dataset.value = value === null ? '' : String(value);
				tr.append(c);
				return c;
			};
			const th = document.createElement('th');
			th.scope = 'row';
			th.dataset.type = 'text';
			th.textContent = COMPARE_QUANTILES[i];
			tr.append(th);
			const iv = m && interval(m.fair);
			const naive = m ? finite(m.naive) : null;
			if (iv) {
				const v = verdict(spec, iv);
				td('verdict', v).dataset.type = 'text';
				td('fair', fmtRatio(iv.ratio), iv.ratio);
				td('interval', fmtRatio(iv.low) + '\u2013' + fmtRatio(iv.high));
			} else {
				const c = td('fair', m && str(m.not_comparable) ? 'not comparable: ' + str(m.not_comparable) : 'not comparable', null);
				c.colSpan = 3;
				c.className = 'not-comparable';
				c.dataset.type = 'text';
			}
			td('naive', naive === null ? DASH : fmtRatio(naive), naive);
			for (const s of ['a', 'b']) {
				const cov = m ? finite(m['coverage_' + s]) : null;
				const c = td('coverage_' + s, cov === null ? DASH : fmtPercent(cov), cov);
				if (m) c.title = fmtCount(finite(m['shared_' + s]) || 0) + ' requests in the ' + (finite(m.cells) || 0) + ' cells both share (a cell needs ' + (finite(m.min_requests) || 0) + ' of each side)';
			}
			return tr;
		}));
	}

	// inputText writes an input bucket as <512, 512–1k, 1k–2k or 32k+.
	function inputText(c) {
		const k = (v) => (v >= 1024 ? v / 1024 + 'k' : String(v));
		const lo = finite(c.input_min);
		const hi = finite(c.input_max);
		if (hi === null) return k(lo) + '+';
		if (lo === 0) return '<' + k(hi + 1);
		return k(lo) + '\u2013' + k(hi + 1);
	}

	// renderCells draws the cells as a grid of requests in flight (rows) by
	// input tokens (columns), each with both sides' requests and the cell's
	// ratio at CELL_QUANTILE, the cells that do not count greyed.
	function renderCells(spec, cells) {
		const svg = document.getElementById(spec.id + '-cells');
		if (!svg) return;
		const width = Math.max(320, Math.round(svg.parentElement.clientWidth || 600));
		const inflight = new Map();
		const inputs = new Map();
		for (const c of cells) {
			inflight.set(finite(c.inflight_min), inflightText(c));
			inputs.set(finite(c.input_min), inputText(c));
		}
		if (cells.length === 0) {
			svg.setAttribute('viewBox', `0 0 ${width} 24`);
			svg.setAttribute('height', '24');
			svg.setAttribute('aria-label', 'No cells');
			svg.replaceChildren(svgEl('text', { class: 'nodata', x: 0, y: 16 }, 'No request of either side has a cell yet.'));
			return;
		}
		const rowsOrder = [...inflight.keys()].sort((a, b) => a - b);
		const colsOrder = [...inputs.keys()].sort((a, b) => a - b);
		const left = 70;
		const top = 30;
		const cellH = 32;
		const cellW = Math.min(110, (width - left) / colsOrder.length);
		const height = top + rowsOrder.length * cellH + 2;
		svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
		svg.setAttribute('height', String(height));
		const parts = [
			svgEl('text', { class: 'axis', x: 0, y: 10 }, 'Cells, ' + CELL_QUANTILE),
			svgEl('text', { class: 'axis', x: left, y: 10 }, 'input tokens \u2192'),
			svgEl('text', { class: 'axis', x: 0, y: top - 6 }, 'in flight \u2193'),
		];
		colsOrder.forEach((lo, j) => parts.push(svgEl('text', { class: 'axis', x: left + (j + 0.5) * cellW, y: top - 6, 'text-anchor': 'middle' }, inputs.get(lo))));
		rowsOrder.forEach((lo, i) => parts.push(svgEl('text', { class: 'axis', x: left - 8, y: top + (i + 0.5) * cellH + 4, 'text-anchor': 'end' }, inflight.get(lo))));
		const counted = [];
		const thin = [];
		for (const c of cells) {
			const i = rowsOrder.indexOf(finite(c.inflight_min));
			const j = colsOrder.indexOf(finite(c.input_min));
			const ms = Array.isArray(c.metrics) ? c.metrics.filter((m) => m && m.metric === spec.metric) : [];
			const m = ms.find((x) => x.quantile === CELL_QUANTILE) || {};
			const na = finite(m.count_a) || 0;
			const nb = finite(m.count_b) || 0;
			const iv = interval(m.ratio);
			const where = inflight.get(finite(c.inflight_min)) + ' in flight, ' + inputs.get(finite(c.input_min)) + ' tokens';
			const g = svgEl('g', { class: 'cell' + (iv ? '' : ' thin'), 'data-inflight': inflight.get(finite(c.inflight_min)), 'data-input': inputs.get(finite(c.input_min)), 'data-a': na, 'data-b': nb, 'data-ratio': iv ? iv.ratio : '' });
			const cx = left + j * cellW;
			const cy = top + i * cellH;
			const v = verdict(spec, iv);
			g.append(svgEl('rect', { x: cx + 1, y: cy + 1, width: cellW - 2, height: cellH - 2, rx: 2, fill: iv ? VERDICT_COLOUR[v] : 'none' }));
			g.append(svgEl('text', { class: 'ratio', x: cx + cellW / 2, y: cy + 14, 'text-anchor': 'middle' }, iv ? fmtRatio(iv.ratio) : DASH));
			g.append(svgEl('text', { class: 'counts', x: cx + cellW / 2, y: cy + 26, 'text-anchor': 'middle' }, 'A ' + fmtCount(na) + ' \u00b7 B ' + fmtCount(nb)));
			const detail = ms.map((x) => {
				const r = interval(x.ratio);
				return x.quantile + ' ' + (r ? fmtRatio(r.ratio) + ' (95 % ' + fmtRatio(r.low) + '\u2013' + fmtRatio(r.high) + ', weight ' + fmtPercent(finite(x.weight) || 0) + ')' : 'not counted');
			}).join('; ');
			g.append(svgEl('title', {}, where + ': A ' + na + ', B ' + nb + ' requests; B/A ' + detail));
			(iv ? counted : thin).push(where + ': ' + (iv ? fmtRatio(iv.ratio) + ', ' : '') + 'A ' + na + ', B ' + nb);
			parts.push(g);
		}
		svg.setAttribute('aria-label', spec.what + ' ' + CELL_QUANTILE + ' by cell, B over A. Counted: ' + (counted.join('; ') || 'none') +
			'. Too few requests to count: ' + (thin.join('; ') || 'none') + '.');
		svg.replaceChildren(...parts);
	}

	// ---- page state ----

	function render() {
		const rows = sortedRows();
		renderTable(rows);
		renderBanner(rows);
		renderLive();
		for (const spec of CHARTS) renderChart(spec, rows);
		for (const spec of SERIES_CHARTS) renderSeries(spec, rows);
		for (const spec of INFLIGHT_CHARTS) renderInflight(spec, rows);
		renderCompareChoices();
	}

	function showMessage(kind, text) {
		if (!kind) {
			el.message.hidden = true;
			el.message.textContent = '';
			delete el.message.dataset.kind;
			return;
		}
		el.message.hidden = false;
		el.message.dataset.kind = kind;
		el.message.setAttribute('role', kind === 'error' ? 'alert' : 'status');
		el.message.textContent = text;
	}

	// renderBanner names every slow row and why, above the table, so that a
	// slowdown is seen without scanning a column.
	function renderBanner(rows) {
		const slow = rows.filter((r) => healthText(r) === 'slow');
		el.banner.hidden = slow.length === 0;
		el.banner.replaceChildren(...slow.map((r) => {
			const p = document.createElement('p');
			const since = r.health.since ? new Date(r.health.since) : null;
			const name = document.createElement('strong');
			name.textContent = 'Slow: ' + str(r.model) + (labelText(r.labels) ? ' (' + labelText(r.labels) + ')' : '');
			p.dataset.model = str(r.model);
			p.append(name, (since && !Number.isNaN(since.getTime()) ? ' since ' + fmtTime(since) : '') + ' \u2014 ' + str(r.health.reason));
			return p;
		}));
	}

	// renderLive lists the requests in flight now, the stalled ones marked:
	// an incident shows here while it happens, before its requests end
	// and reach the table. Hidden while nothing is in flight.
	function renderLive() {
		const rows = state.live.filter((r) => finite(r.in_flight) > 0);
		el.live.hidden = rows.length === 0;
		el.liveBody.replaceChildren(...rows.map((r) => {
			const tr = document.createElement('tr');
			tr.dataset.provider = str(r.provider);
			tr.dataset.model = str(r.model);
			if (finite(r.stalled) > 0) tr.classList.add('stalled');
			for (const [col, v] of [['provider', str(r.provider)], ['model', str(r.model)]]) {
				const td = document.createElement('td');
				td.dataset.col = col;
				td.dataset.type = 'text';
				td.textContent = v;
				tr.append(td);
			}
			for (const col of ['in_flight', 'waiting', 'receiving', 'stalled']) {
				const td = document.createElement('td');
				const v = finite(r[col]);
				td.dataset.col = col;
				td.dataset.value = v === null ? '' : String(v);
				td.textContent = v === null ? '–' : fmtCount(v);
				tr.append(td);
			}
			return tr;
		}));
	}

	function applyData(data) {
		state.rows = data.rows.filter((r) => r && typeof r === 'object');
		state.live = Array.isArray(data.live) ? data.live.filter((r) => r && typeof r === 'object') : [];
		state.windowSeconds = finite(data.window_seconds) || WINDOWS[state.window];
		state.loaded = new Date();
		state.loads++;
		el.table.classList.remove('stale');
		el.title.textContent = 'Per model, last ' + describeWindow(state.windowSeconds);
		const generated = data.generated_at ? new Date(data.generated_at) : null;
		const at = generated && !Number.isNaN(generated.getTime()) ? generated : state.loaded;
		el.status.textContent = 'Updated ' + fmtTime(at) + ' · refreshing every ' + refreshSeconds + NNBSP + 's';
		el.body.dataset.loads = String(state.loads);
		if (state.rows.length === 0) {
			el.body.dataset.state = 'empty';
			showMessage('empty', 'No requests finished in the last ' + describeWindow(state.windowSeconds) +
				'. Send traffic through a route with the tokentap handler and its models appear here within seconds.');
		} else {
			el.body.dataset.state = 'ok';
			showMessage(null);
		}
		render();
	}

	function showError(text) {
		el.body.dataset.state = 'error';
		let msg = 'Cannot load the live stats: ' + text + '. Retrying every ' + refreshSeconds + NNBSP + 's.';
		if (state.loaded) {
			msg += ' The table shows the last data, from ' + fmtTime(state.loaded) + '.';
			el.table.classList.add('stale');
		}
		showMessage('error', msg);
		el.status.textContent = state.loaded ? 'Stale since ' + fmtTime(state.loaded) : 'No data';
	}

	// apiMessage pulls the reason out of an error body: Caddy's admin API
	// answers {"error": "..."}; anything else is shown shortened.
	function apiMessage(text) {
		let msg = '';
		try {
			const j = JSON.parse(text);
			msg = str(j && (j.error || j.message));
		} catch {
			msg = text.trim();
		}
		if (msg.length > 200) msg = msg.slice(0, 199) + '…';
		return msg ? ': ' + msg : '';
	}

	function validate(data) {
		if (!data || typeof data !== 'object' || !Array.isArray(data.rows)) {
			throw new Error('the answer is not a stats document (no rows)');
		}
		if (data.version !== 1) {
			throw new Error('the answer is stats version ' + data.version + ', and this page reads version 1');
		}
	}

	async function load() {
		clearTimeout(state.timer);
		const seq = ++state.seq;
		const ctl = new AbortController();
		const timeout = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
		let data = null;
		let error = '';
		try {
			const resp = await fetch('stats?series=true&window=' + encodeURIComponent(state.window), {
				cache: 'no-store',
				headers: { Accept: 'application/json' },
				signal: ctl.signal,
			});
			const text = await resp.text();
			if (!resp.ok) throw new Error('HTTP ' + resp.status + apiMessage(text));
			try {
				data = JSON.parse(text);
			} catch {
				throw new Error('the answer is not JSON');
			}
			validate(data);
		} catch (err) {
			data = null;
			if (err.name === 'AbortError') error = 'no answer within ' + FETCH_TIMEOUT_MS / 1000 + NNBSP + 's';
			else if (err instanceof TypeError) error = 'the admin API is unreachable (' + err.message + ')';
			else error = err.message;
		} finally {
			clearTimeout(timeout);
		}
		if (seq !== state.seq) return; // a newer request (a window change) took over
		if (data) {
			applyData(data);
			loadCompare();
		} else showError(error);
		state.timer = setTimeout(tick, refreshSeconds * 1000);
	}

	// tick skips the request while the tab is hidden: nobody is reading,
	// and the page comes back up to date as soon as it is shown.
	function tick() {
		if (document.hidden) {
			state.timer = setTimeout(tick, refreshSeconds * 1000);
			return;
		}
		load();
	}

	function setWindow(w) {
		if (!Object.hasOwn(WINDOWS, w) || w === state.window) return;
		state.window = w;
		const url = new URL(location.href);
		url.searchParams.set('window', w);
		history.replaceState(null, '', url);
		el.raw.href = 'stats?window=' + w;
		el.raw.textContent = 'stats?window=' + w;
		el.body.dataset.state = 'loading';
		el.status.textContent = 'Loading the last ' + describeWindow(WINDOWS[w]) + '…';
		load();
	}

	function start() {
		buildHeader();
		for (const input of el.windows) {
			input.checked = input.value === state.window;
			input.addEventListener('change', () => {
				if (input.checked) setWindow(input.value);
			});
		}
		el.raw.href = 'stats?window=' + state.window;
		el.raw.textContent = 'stats?window=' + state.window;
		el.compareA.addEventListener('change', () => setCompare('a', el.compareA.value));
		el.compareB.addEventListener('change', () => setCompare('b', el.compareB.value));
		document.addEventListener('visibilitychange', () => {
			if (!document.hidden) load();
		});
		let pending = 0;
		window.addEventListener('resize', () => {
			cancelAnimationFrame(pending);
			pending = requestAnimationFrame(() => {
				const rows = sortedRows();
				for (const spec of CHARTS) renderChart(spec, rows);
				renderCompare();
			});
		});
		render();
		load();
	}

	start();
})();
