// End-to-end walk through the web UI of the real dev stack (the `make run`
// process, started by devstack_test.go with $BASE_URL and the first admin's
// one-time password in $ADMIN_PASSWORD). Every step saves a screenshot to
// $SCREENSHOTS; any failed expectation exits non-zero with the reason.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const base = process.env.BASE_URL;
const shots = process.env.SCREENSHOTS;
const newPassword = process.env.NEW_PASSWORD;
mkdirSync(shots, { recursive: true });
const t0 = Date.now();

function expect(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
  console.log(`ok  ${((Date.now() - t0) / 1000).toFixed(1)}s  ${what}`);
}

// verdict waits for the guardrail's final decision on a version, read from
// the engine's API, and returns it.
async function verdict(service, version, limit) {
  const end = Date.now() + limit;
  let last = "no decision yet";
  for (;;) {
    const r = await fetch(base + "/engine/api/v1/guardrails");
    if (r.ok) {
      const d = (await r.json()).decisions.find((d) => d.service === service && d.version === version);
      if (d && d.final) return d;
      if (d) last = `${d.verdict}: ${d.reason}`;
    }
    if (Date.now() > end) throw new Error(`no final guardrail verdict on ${service} v${version} within ${limit / 1000}s (${last})`);
    await new Promise((ok) => setTimeout(ok, 500));
  }
}

// poll reloads the page until check() holds, every 1.5 s up to limit ms.
async function poll(page, url, check, limit, what) {
  const end = Date.now() + limit;
  for (;;) {
    await page.goto(base + url);
    if (await check()) return;
    if (Date.now() > end) throw new Error(`not within ${limit / 1000}s: ${what}`);
    await page.waitForTimeout(1500);
  }
}

// engineView summarizes what the engine's read API says about a service,
// for the message of a step that timed out waiting on the engine.
async function engineView(service) {
  try {
    const r = await fetch(base + "/engine/api/v1/services/" + service);
    if (!r.ok) return `engine on ${service}: HTTP ${r.status} ` + (await r.text()).slice(0, 300);
    const s = await r.json();
    const rec = s.recommendation;
    return `engine on ${service}: score ${s.score?.raw?.score?.toFixed(2) ?? "none"} at ${s.score?.at}, active v${s.active_version}, ` +
      `${s.pending} pending, instances ${JSON.stringify(s.instances)}, recommendation: ` +
      (rec ? `${rec.inconclusive ? "inconclusive" : "conclusive"} at ${rec.at} on v${rec.base}: ${rec.reason}` : "none");
  } catch (e) {
    return `engine on ${service}: ${e}`;
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const cspViolations = [];

async function newPage(viewport = { width: 1280, height: 860 }) {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) cspViolations.push(m.text()); });
  page.setDefaultTimeout(20000);
  return page;
}

// login signs in; a user with a one-time password is sent to choose a new one.
async function login(page, name, password, firstTime, shotName) {
  await page.goto(base + "/");
  expect(page.url().includes("/login"), `${name}: an anonymous visit lands on the login page`);
  await page.fill("#name", name);
  await page.fill("#password", password);
  await page.click("button[type=submit]");
  if (!firstTime) {
    await page.waitForURL(base + "/");
    return;
  }
  await page.waitForURL(/\/account\/password$/);
  expect((await page.textContent("body")).includes("one-time password"), `${name}: the one-time password must be replaced first`);
  if (shotName) await shot(page, shotName);
  await page.fill("#current", password);
  await page.fill("#next", newPassword);
  await page.click('button:text-is("Change password")');
  await page.waitForURL(base + "/");
  expect(true, `${name}: chose a new password`);
}

// shot saves a screenshot and collects any card whose content spills out.
const overflows = [];
async function shot(page, name) {
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  const spilled = await page.evaluate(() => [...document.querySelectorAll(".card")]
    .filter((c) => getComputedStyle(c).overflowX === "visible" && c.scrollWidth > c.clientWidth + 1)
    .map((c) => (c.querySelector("h2, h3, strong") || c).textContent.trim().slice(0, 40)));
  for (const c of spilled) overflows.push(`${name}: ${c}`);
}

try {
  // The first admin, with the one-time password printed in the banner.
  const admin = await newPage();
  await admin.goto(base + "/login");
  await shot(admin, "01-login");
  await login(admin, "admin", process.env.ADMIN_PASSWORD, true, "02-choose-password");

  // The admin creates an approver on the settings page.
  await admin.goto(base + "/settings");
  await admin.fill("#u-name", "bob");
  await admin.check('form[action="/settings/users"] input[value=approver]');
  await admin.click('button:text-is("Add user")');
  const notice = await admin.textContent(".banner-ok");
  const m = notice.match(/One-time password \(shown once\): (\S+)/);
  expect(m, "the admin created bob (approver) and sees his one-time password once");
  const bobOneTime = m[1];
  await shot(admin, "03-settings-user-created");
  // An admin (here the only one) may not take their own admin role away:
  // the page says why, naming the field, and the role stays.
  const ownRoles = 'form[action="/settings/users/admin/roles"]';
  await admin.uncheck(`${ownRoles} input[value=admin]`);
  await admin.click(`${ownRoles} button:text-is("Save")`);
  await admin.waitForSelector(".banner-error");
  const refusal = (await admin.textContent(".banner-error")).trim();
  expect(/\broles: .*own admin role/.test(refusal), "the admin cannot remove their own admin role: " + refusal);
  const again = await admin.goto(base + "/settings");
  expect(again.status() === 200 && await admin.isChecked(`${ownRoles} input[value=admin]`), "the admin keeps the admin role and the settings page");

  // The overview updates live during the demo incident on checkout.
  await admin.goto(base + "/");
  await admin.waitForSelector('#live[data-state="live"]');
  expect(true, "the overview stream is live");
  // A mark on this document survives only if nothing reloads the page.
  await admin.evaluate(() => { document.body.dataset.e2eMark = "same-document"; });
  const sameDocument = async () => (await admin.evaluate(() => document.body.dataset.e2eMark)) === "same-document";
  const before = await admin.textContent("#overview-rows");
  // (page.waitForFunction evaluates a string, which the CSP refuses: poll from here.)
  for (const end = Date.now() + 15000; (await admin.textContent("#overview-rows")) === before;) {
    if (Date.now() > end) throw new Error("the overview rows did not change within 15s");
    await admin.waitForTimeout(250);
  }
  expect(await sameDocument(), "the overview rows change without a reload");
  // The incident (checkout loses three quarters of its capacity from 8 s
  // into every 24 s period) raises checkout's load score: the page that
  // stays open shows it climb above the setpoint (0.5), with the engine's
  // recommendation as an open proposal, all pushed by the stream.
  const checkoutRow = admin.locator('#overview-rows tr:has(a[href="/services/checkout"])');
  const scores = [];
  let low = Infinity;
  for (const end = Date.now() + 60000; ;) {
    const text = await checkoutRow.textContent();
    const score = Number(await checkoutRow.locator("td.num").first().textContent());
    if (!Number.isNaN(score) && scores[scores.length - 1] !== score) scores.push(score);
    const rising = score >= 0.55 && score > low;
    low = Math.min(low, score);
    if ((rising || text.includes("overloaded")) && /\d+ open/.test(text)) break;
    if (Date.now() > end) throw new Error("no live incident on checkout within 60s; scores seen: " + scores.join(" ") + "; " + await engineView("checkout"));
    await admin.waitForTimeout(250);
  }
  expect(await sameDocument(), "the incident shows up live: checkout's score went " + scores.join(" → ") + " and a proposal is open");
  await shot(admin, "04-overview-incident");

  await admin.click('a[href="/services/checkout"]');
  await admin.waitForSelector("svg.chart");
  expect((await admin.textContent("body")).includes("Why the score is what it is"), "the service page explains the score");
  const clipped = await admin.evaluate(() => [...document.querySelectorAll("svg.chart text")]
    .filter((t) => t.getBBox().x < 0).map((t) => t.textContent));
  expect(clipped.length === 0, "every chart label fits in its chart" + (clipped.length ? ": clipped " + clipped.join(", ") : ""));
  await shot(admin, "05-service");
  // The p99 chart draws the engine's p99 alert level (learned from the healthy baseline) as its target.
  await poll(admin, "/services/checkout", async () => (await admin.locator("p.chart-note").count()) > 0, 30000,
    "a p99 target on checkout's p99 chart");
  const note = await admin.textContent("p.chart-note");
  expect((await admin.locator("svg.chart line.band-target").count()) === 1 && /warn level [\d.]+ ms/.test(note),
    "the p99 chart draws the engine's target with its label and unit: " + note);
  // The alert levels in force, per signal, with where each comes from and the baseline behind learned ones.
  const levels = (await admin.textContent("#alert-levels")).replace(/\s+/g, " ");
  expect(/p99 latency/.test(levels) && /error ratio/.test(levels) && /learned from the healthy baseline/.test(levels) &&
    /over \d+ healthy intervals/.test(levels), "the service page lists the alert levels with their origin and baseline: " + levels);

  // The engine's recommendation and its evidence.
  const engineCard = (page) => page.locator("div.card").filter({ has: page.locator("h2", { hasText: /checkout v\d+\s+engine/ }) });
  await poll(admin, "/recommendations", async () => (await engineCard(admin).count()) > 0, 60000,
    "an engine recommendation for checkout");
  expect(true, "the engine recommends a change to checkout");
  const card = engineCard(admin).first();
  const effect = (await card.locator("dd.effect").textContent()).trim();
  await card.locator("details summary").click();
  await card.locator("details[open] pre").waitFor();
  const raw = await card.locator("details[open] pre").textContent();
  expect(effect !== "" && ["load_score", "setpoint", "pid", "expected_effect"].every((k) => raw.includes(`"${k}"`)),
    `the recommendation carries its evidence: the expected effect (${effect}) and the raw evidence on a click`);
  await shot(admin, "06-recommendations-evidence");
  // The recommendation's own page: the evidence charts over the window before it.
  await card.locator('h2 a[href^="/recommendations/checkout/"]').click();
  await admin.waitForURL(/\/recommendations\/checkout\/\d+$/);
  await admin.waitForSelector(".evcharts svg.chart");
  const evCharts = await admin.evaluate(() => [...document.querySelectorAll(".evcharts figure")].map((f) => ({
    title: (f.querySelector("h3")?.textContent || "").trim(),
    axes: f.querySelectorAll("svg.chart line.axis").length,
    lines: f.querySelectorAll("svg.chart polyline, svg.chart circle").length,
    nodata: (f.querySelector(".nodata")?.textContent || "").trim(),
  })));
  expect(evCharts.length === 4 && evCharts.every((c) => c.axes === 2 || c.nodata !== "") &&
    evCharts.filter((c) => /^(Load score|p99 latency)/.test(c.title)).every((c) => c.axes === 2 && c.lines > 0),
    "the evidence charts render as SVG with axes (the load score and p99 with data): " + JSON.stringify(evCharts));
  await shot(admin, "06b-recommendation-detail");
  await admin.goBack();
  await card.locator('a:text-is("Full version")').click();
  await admin.waitForURL(/\/services\/checkout\/rules\/\d+$/);
  const recHref = admin.url().replace("/services/checkout/rules/", "/recommendations/checkout/").replace(base, "");
  expect((await admin.locator('h2:text-is("Evidence")').count()) === 1 && (await admin.locator(`a[href="${recHref}"]`).count()) === 1,
    "the version page shows the evidence, with a link to it explained");
  await shot(admin, "07-recommendation-version");

  // Self-approval: the admin proposes a change and may not approve it.
  await admin.goto(base + "/services/checkout/propose");
  const yaml = await admin.inputValue("#ruleset");
  expect(/rate: \d+/.test(yaml), "the propose form starts from the active rules");
  await admin.fill("#ruleset", yaml.replace(/rate: \d+(\.\d+)?/, "rate: 61"));
  await admin.fill("#reason", "a little less for the holidays");
  await admin.click('button:text-is("Propose")');
  await admin.waitForURL(/rules\/\d+$/);
  expect(await admin.locator('button:text-is("Approve")').isDisabled(), "the author's Approve button is disabled");
  expect((await admin.textContent("#approve-why")).includes("four eyes"), "the disabled button says why (four eyes)");
  const status = await admin.evaluate(async () => {
    const csrf = document.querySelector("input[name=csrf]").value;
    const api = location.pathname.replace("/services/", "/api/v1/services/").replace("/rules/", "/versions/");
    const r = await fetch(api + "/approve", { method: "POST", headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json" }, body: "{}" });
    return [r.status, (await r.json()).error];
  });
  expect(status[0] === 403 && /self-approval/.test(status[1]), "the server refuses self-approval too: " + status[1]);
  await shot(admin, "08-self-approval-refused");
  await admin.click('button:text-is("Withdraw")');
  await admin.waitForSelector(".card .state-withdrawn");

  // Bob logs in for the first time and approves the engine's recommendation.
  const bob = await newPage();
  await login(bob, "bob", bobOneTime, true);
  let approved = "";
  for (let i = 0; i < 8 && !approved; i++) {
    await poll(bob, "/recommendations", async () => (await engineCard(bob).count()) > 0, 30000,
      "an engine recommendation for bob");
    // The engine refreshes its proposal every few ticks; one that was
    // superseded between the list and the click has no decision form.
    await bob.goto(base + (await engineCard(bob).first().locator('a:text-is("Full version")').getAttribute("href")));
    if ((await bob.locator("#comment").count()) === 0) {
      console.log("    the proposal moved on before bob opened it: " + bob.url());
      continue;
    }
    await bob.fill("#comment", "evidence looks right");
    await bob.click('button:text-is("Approve")');
    await bob.waitForLoadState();
    if (await bob.locator(".badge-active").count() > 0) {
      approved = bob.url();
    } else {
      console.log("    approve did not take (the engine moved on?): " + (await bob.textContent("body")).slice(0, 200).replace(/\s+/g, " "));
    }
  }
  expect(approved && (await bob.textContent("body")).includes("Approved by bob"), "bob's approval makes the recommendation active");
  await shot(bob, "09-approved");
  const version = Number(approved.match(/(\d+)$/)[1]);

  // The guardrail judges the approved version. Checkout's incident recurs
  // every 24 s, so its goodput may drop after the approval for reasons
  // that are not the version, and the guardrail may roll it back by itself
  // within seconds. Its final verdict comes first: from then on only the
  // admin changes checkout's active version (a decided version is not
  // judged again, a rollback is never rolled back), so the admin's
  // rollback below cannot race the engine's.
  const judged = await verdict("checkout", version, 60000);
  const engineRollback = judged.rollback_version || 0;
  expect(judged.verdict !== "regression" || engineRollback > version,
    `the guardrail's final verdict on checkout v${version}: ${judged.verdict}` +
    (engineRollback ? `, rolled back to v${judged.parent} as v${engineRollback}` : "") + ` (${judged.reason})`);
  const live = engineRollback || version;

  // The ledger reaches SYNCED on every instance, on the version the
  // guardrail left active.
  await poll(bob, "/services/checkout", async () => {
    const rows = await bob.locator("h2:text-is('Instances') + .tablewrap tbody tr").allTextContents();
    return rows.length === 2 && rows.every((r) => r.includes("SYNCED") && r.includes("v" + live)) &&
      (await bob.textContent("body")).includes("2/2 SYNCED");
  }, 30000, `both instances SYNCED on v${live}`);
  expect(true, `the ledger reaches SYNCED: 2/2 instances run v${live}`);
  await shot(bob, "10-ledger-synced");

  // The admin rolls back with the diff preview: to the version before the
  // approved one, or, when the guardrail already did that, to the approved
  // version itself (the admin overrides the engine, whose drop the
  // incident explains). Either is the newest version that went live and is
  // not active, the first on the timeline that offers a rollback.
  const to = engineRollback ? version : judged.parent;
  await admin.goto(base + "/services/checkout/rules");
  await shot(admin, "11-timeline");
  const target = admin.locator('a:text-is("Roll back to this")').first();
  const href = await target.getAttribute("href");
  expect(href === `/services/checkout/rollback/${to}`, `the timeline offers the rollback to v${to} first: ${href}`);
  await target.click();
  await admin.waitForSelector("table.diff");
  const diff = await admin.textContent("table.diff");
  expect(diff.includes("routes[api].rate_limit.rate") && diff.includes("routes[api].concurrency.max"),
    `the rollback preview (${href}) shows what changes: the rate limit and the concurrency ceiling`);
  await shot(admin, "12-rollback-preview");
  const reason = engineRollback ? "the incident explains the drop, not the change" : "errors went up after the change";
  await admin.fill("#reason", reason);
  await admin.check("input[name=confirm]");
  await admin.click(`button:text-is("Roll back to v${to}")`);
  await admin.waitForSelector(`text=Rollback to the content of v${to}`);
  const rolledBack = admin.url().match(/\/rules\/(\d+)$/)[1];
  expect((await admin.textContent("h1")).includes("active") && (await admin.textContent(".card")).includes("Reason: " + reason),
    `the rollback to v${to} is a new, active version (v${rolledBack}) with its reason`);
  await shot(admin, "13-rolled-back");

  // The admin, on a phone, acknowledges a P1 alert.
  const phone = await newPage({ width: 375, height: 812 });
  await login(phone, "admin", newPassword, false);
  const widths = await phone.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  expect(widths[0] <= widths[1], `the overview does not scroll sideways on a 375 px phone (scrollWidth ${widths[0]}, innerWidth ${widths[1]})`);
  await shot(phone, "14-overview-phone");
  const p1Row = 'tbody tr:has(span.tier-P1):has(button:text-is("Acknowledge"))';
  await poll(phone, "/alerts", async () => (await phone.locator(p1Row).count()) > 0, 60000, "a firing P1 alert");
  const row = phone.locator(p1Row).first();
  const summary = await row.locator("td").nth(2).textContent();
  expect(true, "a P1 alert fires: " + summary);
  await shot(phone, "15-alerts-firing");
  await row.locator('button:text-is("Acknowledge")').click();
  await phone.waitForSelector(`tbody tr:has(span.tier-P1):has-text(${JSON.stringify(summary)}) >> text=acknowledged by admin`);
  expect(true, "the P1 alert is acknowledged");
  await shot(phone, "16-alerts-acknowledged");

  await admin.goto(base + "/audit?service=checkout");
  await admin.click('a:text-is("Verify the whole chain now")');
  expect((await admin.textContent(".banner-ok")).includes("Whole chain verified now"), "the whole audit chain verifies, walked on request");
  const audit = await admin.$$eval("table tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim())));
  const rbEntry = audit.find((r) => r[3] === "rollback" && r[5] === rolledBack);
  expect(rbEntry && rbEntry[2] === "admin" && rbEntry[6].includes(JSON.stringify({ reason }).slice(1, -1)) && rbEntry[6].includes(`"rollback_of":${to}`),
    "the audit log records the admin's rollback with its reason: " + JSON.stringify(rbEntry));
  const apEntry = audit.find((r) => r[3] === "approve" && r[5] === String(version));
  expect(apEntry && apEntry[2] === "bob" && apEntry[6].includes("evidence looks right"),
    `the audit log records bob's approval of v${version} with his comment: ` + JSON.stringify(apEntry));
  await shot(admin, "17-audit");
  expect(overflows.length === 0, "no card's content spills out of it" + (overflows.length ? ": " + overflows.join(" | ") : ""));
  expect(cspViolations.length === 0, "no Content-Security-Policy violations: " + cspViolations.join(" | "));
  console.log("PASS");
} catch (e) {
  console.error(String((e && e.stack) || e));
  process.exitCode = 1;
} finally {
  await browser.close();
}
