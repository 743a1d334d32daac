"""The admin console (`/admin`) in headless Chromium against a real ferry-server and real
devices: sign in, the dashboard's counters (GET stats), the device with its SDK string (GET
devices), its rejected write with the seeds' reason and rule (GET rejected-writes), its sync
log (connection, bind, subscription, upload, compensating write), the app's settings, terminate
sync through the confirmation and see the device get error 240, revoke a user's sessions and
delete a user (their devices get error 401); a bad token is refused and shows no data; a server
without an admin token says the API is disabled. Screenshots of every page, 1280 and 360 px
wide, go to the artifacts folder."""

from __future__ import annotations

import base64
import http.server
import json
import re
import shutil
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import ADMIN_TOKEN, REPO, TIMEOUT, Device, Server, wait_until

DESKTOP = 1280
PHONE = 360
PAGES = ["dashboard", "devices", "users", "sync-log", "rejected", "triggers", "sync", "settings"]


def wait(driver: Any, condition: Any, message: str = "", timeout: float = TIMEOUT) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(condition, message)


def text_of(driver: Any, css: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def set_viewport(driver: Any, width: int, height: int = 900) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def screenshot(driver: Any, artifacts: Path, name: str) -> None:
    """The whole page (beyond the viewport) at the current width."""
    data = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    (artifacts / f"{name}.png").write_bytes(base64.b64decode(data["data"]))


# The elements that reach past the screen's right edge (their tag, id, class and width).
WIDER_THAN_SCREEN = """
return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > arguments[0] + 1)
  .slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
"""


# The tables that do not fit their box (they would scroll sideways): id and widths.
CLIPPED_TABLES = """
return [...document.querySelectorAll('.table-wrap')].filter(w => w.scrollWidth > w.clientWidth + 1)
  .map(w => (w.querySelector('table').id || '?') + ' ' + w.scrollWidth + '>' + w.clientWidth);
"""


def shoot_both(driver: Any, artifacts: Path, name: str, ready: Any = None) -> None:
    """Desktop and phone screenshots of what is shown; on the phone, the navigation is folded
    and nothing is wider than the screen."""
    set_viewport(driver, DESKTOP)
    if ready:
        wait(driver, ready, f"{name} not ready at {DESKTOP}px")
    screenshot(driver, artifacts, f"{name}-desktop")
    clipped = driver.execute_script(CLIPPED_TABLES)
    assert not clipped, f"{name}: tables wider than the page at {DESKTOP}px: {clipped}"
    set_viewport(driver, PHONE, 780)
    try:
        wait(driver, lambda d: d.execute_script("return window.innerWidth") == PHONE, "a 360 px layout viewport")
    except Exception:
        wide = driver.execute_script(WIDER_THAN_SCREEN, PHONE)
        raise AssertionError(f"{name}: the page is wider than a {PHONE}px screen: {wide}")
    if ready:
        wait(driver, ready, f"{name} not ready at {PHONE}px")
    if not driver.find_element(By.ID, "shell").get_attribute("hidden"):
        assert not driver.find_element(By.ID, "nav").is_displayed(), "the navigation is folded on a phone"
        assert driver.find_element(By.ID, "nav-toggle").is_displayed()
    overflow = driver.execute_script("return document.documentElement.scrollWidth")
    assert overflow <= PHONE, f"{name}: the page is {overflow}px wide on a {PHONE}px screen"
    screenshot(driver, artifacts, f"{name}-phone")
    set_viewport(driver, DESKTOP)


def click(driver: Any, css: str) -> None:
    """Clicks the element, scrolled to the middle of the screen (clear of the sticky top bar);
    found again if a refresh of the page replaced it meanwhile."""
    def attempt(d: Any) -> bool:
        element = d.find_element(By.CSS_SELECTOR, css)
        if not (element.is_displayed() and element.is_enabled()):
            return False
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        element.click()
        return True
    wait(driver, attempt, f"{css} clicked")


def go(driver: Any, page: str, query: str = "") -> None:
    driver.execute_script("location.hash = arguments[0]", f"#/{page}{query}")
    wait(driver, lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == page, f"page {page}")


def sign_in(driver: Any, url: str, token: str) -> None:
    driver.get(f"{url}/admin")
    field = wait(driver, EC.visibility_of_element_located((By.ID, "signin-token")), "the sign-in form")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "signin-submit").click()


def no_script_errors(driver: Any) -> None:
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"
              and "favicon" not in e.get("message", "")
              # A refused token is a 401 the browser logs as a failed resource: expected.
              and " 401 " not in e.get("message", "") and " 403 " not in e.get("message", "")
              # Endpoints an older server does not have yet (the console shows "not available").
              and " 404 " not in e.get("message", "")]
    assert not severe, f"the browser logged errors: {severe}"


def http_get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()


def admin_get(server: Server, path: str) -> Any:
    """The real server's admin API, as the console calls it."""
    request = urllib.request.Request(f"{server.url}/api/admin/v1/{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
        return json.loads(r.read())


def no_fallback(driver: Any) -> None:
    """The page came from the endpoint itself, not from an older server's fallback."""
    shown = [e.get_attribute("data-unavailable") for e in driver.find_elements(By.CSS_SELECTOR, "[data-unavailable]")]
    assert not shown, f"the console says the server lacks {shown}"


def open_details(driver: Any, css: str) -> None:
    """Unfolds every <details> matching `css`."""
    driver.execute_script("document.querySelectorAll(arguments[0]).forEach(e => { e.open = true; })", css)


def user_action(driver: Any, user_id: str, action: str) -> Any:
    """Clicks the action's button in the user's row; answers the confirmation dialog."""
    row = f"//table[@id='users-table']//tr[.//code[text()='{user_id}']]"
    button = wait(driver, EC.element_to_be_clickable((By.XPATH, f"{row}//button[@data-action='{action}']")), f"{action} button")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    dialog = wait(driver, EC.visibility_of_element_located((By.ID, "confirm-dialog")), f"the {action} confirmation")
    assert user_id in dialog.text
    return dialog


def test_console_files_are_served_with_a_strict_policy(server: Server) -> None:
    for path, kind in [("/admin", "text/html"), ("/admin/", "text/html"), ("/admin/console.js", "text/javascript"),
                       ("/admin/console.css", "text/css"), ("/admin/favicon.svg", "image/svg+xml")]:
        status, headers, body = http_get(server.url + path)
        assert status == 200, path
        assert headers["content-type"].startswith(kind), (path, headers["content-type"])
        assert "default-src 'self'" in headers["content-security-policy"]
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"
        assert body
    _, _, page = http_get(server.url + "/admin")
    # Nothing inline (the policy would block it) and nothing from elsewhere.
    assert b"<script>" not in page and b"style=" not in page
    assert not re.search(rb"(src|href)=\"(https?:)?//", page)


def test_a_bad_token_is_refused_and_shows_no_data(server: Server, browser: Any, artifacts: Path,
                                                  device_factory: Any) -> None:
    device = device_factory()  # a user exists: its id must not appear
    sign_in(browser, server.url, "not-the-admin-token")
    refusal = wait(browser, EC.visibility_of_element_located((By.ID, "signin-error")), "the refusal")
    assert refusal.text.startswith("The admin token was refused (401)")
    assert browser.find_element(By.ID, "shell").get_attribute("hidden") is not None
    assert browser.find_element(By.ID, "main").get_attribute("innerHTML") == ""
    assert device.user.id not in browser.page_source
    assert browser.execute_script("return sessionStorage.getItem('ferry.adminToken')") is None
    # A bad token put into storage by hand is checked before anything is shown.
    browser.execute_script("sessionStorage.setItem('ferry.adminToken', 'forged'); location.reload()")
    wait(browser, EC.visibility_of_element_located((By.ID, "signin-error")), "the refusal after a reload")
    assert device.user.id not in browser.page_source
    shoot_both(browser, artifacts, "signin-refused")
    no_script_errors(browser)


def test_a_server_without_admin_token_says_the_api_is_disabled(tmp_path: Path, browser: Any, artifacts: Path) -> None:
    other = Server(tmp_path / "no-admin", admin_token=None)
    try:
        sign_in(browser, other.url, ADMIN_TOKEN)
        refusal = wait(browser, EC.visibility_of_element_located((By.ID, "signin-error")), "the refusal")
        assert refusal.text.startswith("The admin API is disabled on this server (403)")
        assert browser.find_element(By.ID, "main").get_attribute("innerHTML") == ""
        shoot_both(browser, artifacts, "signin-disabled")
    finally:
        other.stop()


def test_operate_a_server_from_the_console(store_server: Server, browser: Any, artifacts: Path,
                                          store_device_factory: Any) -> None:
    # Once on the embedded store, once on PostgreSQL (its screenshots in artifacts/postgres).
    server, device_factory = store_server, store_device_factory
    if server.store != "sqlite":
        artifacts = artifacts / server.store
        artifacts.mkdir(exist_ok=True)
    browser.get(f"{server.url}/admin")
    wait(browser, EC.visibility_of_element_located((By.ID, "signin-token")), "the sign-in form")
    shoot_both(browser, artifacts, "signin")

    # Sign in: the dashboard, live.
    sign_in(browser, server.url, ADMIN_TOKEN)
    wait(browser, EC.visibility_of_element_located((By.ID, "shell")), "the console after sign-in")
    wait(browser, lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == "dashboard", "the dashboard")
    before = int(wait(browser, lambda d: re.fullmatch(r"\d+", text_of(d, "#tile-connections .value")), "a connection count")[0])

    # A device connects: the dashboard's connection count goes up on its own (polling).
    device = device_factory()
    wait(browser, lambda d: text_of(d, "#tile-connections .value") == str(before + 1),
         f"the dashboard shows {before + 1} connection(s)")
    wait(browser, lambda d: text_of(d, "#sync-pill") == "sync enabled", "the sync pill")
    # Every figure from GET stats: sessions, rates (after a second poll), node, the totals.
    wait(browser, lambda d: re.fullmatch(r"[1-9]\d*", text_of(d, "#tile-sessions .value")), "the bound sessions")
    wait(browser, lambda d: re.fullmatch(r"[\d.,]+", text_of(d, "#tile-uploads .value")), "an upload rate")
    wait(browser, lambda d: re.fullmatch(r"[\d.,]+", text_of(d, "#tile-downloads .value")), "a download rate")
    stats = admin_get(server, "stats")
    assert text_of(browser, "#tile-sync .sub") == f"node {stats['node']}"
    assert re.fullmatch(r"[1-9]\d*", text_of(browser, "#tile-bootstraps .value")), "the device's bootstrap is counted"
    for tile in ("compensating", "resets"):
        assert re.fullmatch(r"\d+", text_of(browser, f"#tile-{tile} .value")), tile
    assert "not available" not in browser.find_element(By.ID, "main").text
    no_fallback(browser)
    shoot_both(browser, artifacts, "dashboard-first-device", lambda d: text_of(d, "#tile-connections .value") == str(before + 1))

    # The nav folds into a menu on a phone, and opens.
    set_viewport(browser, PHONE, 780)
    wait(browser, lambda d: d.find_element(By.ID, "nav-toggle").is_displayed(), "the menu button")
    click(browser, "#nav-toggle")
    wait(browser, lambda d: d.find_element(By.ID, "nav").is_displayed(), "the open menu")
    screenshot(browser, artifacts, "menu-phone")
    click(browser, "#nav a[data-page='devices']")
    wait(browser, lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == "devices", "devices from the menu")
    wait(browser, lambda d: not d.find_element(By.ID, "nav").is_displayed(), "the menu closes after a choice")
    set_viewport(browser, DESKTOP)

    # Devices (GET devices): the device with the SDK string its client sent (X-Ferry-SDK).
    listed = [x for x in admin_get(server, "devices")["devices"] if x["user_id"] == device.user.id]
    assert len(listed) == 1 and isinstance(listed[0]["connection_id"], int), listed
    sdk = listed[0]["sdk"]
    assert sdk and re.fullmatch(r"ferry/\d+\.\d+\.\d+ \S+", sdk), sdk
    go(browser, "devices")
    device_row = f"//table[@id='devices-table']//tr[.//code[text()='{device.user.id}']]"
    wait(browser, lambda d: d.find_elements(By.XPATH, device_row), "the device on Devices")
    cells = {td.get_attribute("data-label"): td.text for td in browser.find_elements(By.XPATH, f"{device_row}/td")}
    assert cells["SDK"] == sdk and cells["Connection"] == str(listed[0]["connection_id"]), cells
    assert cells["Client file"] == str(listed[0]["client_file"]) and cells["Sessions"] == "1", cells
    no_fallback(browser)
    shoot_both(browser, artifacts, "devices", lambda d: d.find_elements(By.XPATH, device_row))

    # A write the server rejects: another owner's item. The device's handler gets the seeds'
    # reason (231), and the console shows the same reason.
    key = device.write_item(owner="someone-else", name="Not mine", complexity=2)
    error = device.wait_error(231)
    reasons = [w.reason for w in error.compensating_writes]
    assert len(reasons) == 1
    reason = reasons[0]
    assert re.fullmatch(r'write to "[^"]+" in table "Item" was denied by write filter in role "owner-read-write"', reason), reason
    go(browser, "rejected")
    wait(browser, lambda d: any(c.text == reason for c in d.find_elements(By.CSS_SELECTOR, "#rejected-table td.reason")),
         f"the console shows the rejected write: {reason}")
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#rejected-table tbody tr") if reason in r.text][0]
    cells = {td.get_attribute("data-label"): td.text for td in row.find_elements(By.TAG_NAME, "td")}
    assert cells["User"] == device.user.id and cells["Object type"] == "Item" and cells["Primary key"] == str(key), cells
    assert cells["Rule"] == "write filter" and cells["Role"] == "owner-read-write", cells
    assert row.find_element(By.CSS_SELECTOR, "[data-rule]").get_attribute("data-rule") == "write_filter"
    no_fallback(browser)
    # The same as GET rejected-writes says.
    api_rejected = admin_get(server, f"rejected-writes?user={device.user.id}")["entries"]
    assert [(r["reason"], r["rule"], r["role"]) for r in api_rejected] == [(reason, "write_filter", "owner-read-write")], api_rejected
    shoot_both(browser, artifacts, "rejected-writes", lambda d: d.find_elements(By.CSS_SELECTOR, "#rejected-table td.reason"))

    # The dashboard counts it (GET stats' compensating_writes_total).
    go(browser, "dashboard")
    wait(browser, lambda d: re.fullmatch(r"[1-9]\d*", text_of(d, "#tile-compensating .value")), "a compensating write on the dashboard")
    no_fallback(browser)
    shoot_both(browser, artifacts, "dashboard", lambda d: re.fullmatch(r"[1-9]\d*", text_of(d, "#tile-compensating .value")))

    # Users: the device's user, enabled, with its actions.
    go(browser, "users")
    wait(browser, lambda d: device.user.id in text_of(d, "#users-table"), "the device's user on Users")
    shoot_both(browser, artifacts, "users", lambda d: device.user.id in text_of(d, "#users-table"))

    # The user's sync log (GET users/:id/sync-log): the device's connection, its session's
    # bind, its subscription, the upload of the item and the compensating write, each with its
    # details unfolded.
    go(browser, "sync-log", f"?user={device.user.id}")
    wait(browser, lambda d: "denied by write filter" in text_of(d, "#log-table"), "the rejected write in the user's log")
    no_fallback(browser)
    kinds = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "#log-table .kind")}
    assert {"connection opened", "session bound", "subscription changed", "upload", "compensating write"} <= kinds, kinds
    open_details(browser, "#log-table details.entry-details")
    details = {k: [e.text for e in browser.find_elements(By.CSS_SELECTOR, f"#log-table details[data-kind='{k}']")]
               for k in ("connection_opened", "session_bound", "subscription_changed", "upload", "compensating_write")}
    assert any(sdk in t for t in details["connection_opened"]), details["connection_opened"]
    assert any(f"Client file\n{listed[0]['client_file']}" in t for t in details["session_bound"]), details["session_bound"]
    assert any("simple-items: Item where complexity <= 4" in t and "complete" in t for t in details["subscription_changed"]), details
    assert any(f"create Item {key}" in t for t in details["upload"]), details["upload"]
    written = [t for t in details["compensating_write"] if str(key) in t]
    assert written and "Rule\nwrite filter" in written[0] and "owner-read-write" in written[0], written
    assert reason in text_of(browser, "#log-table td[data-label='Message']")
    shoot_both(browser, artifacts, "sync-log", lambda d: text_of(d, "#log-table"))

    # Settings (GET settings): the app's queryable fields and its role, as the rules file has it.
    settings = admin_get(server, "settings")
    go(browser, "settings")
    wait(browser, lambda d: text_of(d, "#roles-table"), "the roles")
    no_fallback(browser)
    assert text_of(browser, "#queryable-fields").split("\n") == settings["queryable_fields"] == ["complexity", "ownerId"]
    role = {td.get_attribute("data-label"): td.text for td in browser.find_elements(By.CSS_SELECTOR, "#roles-table tbody tr td")}
    assert role["Role"] == "owner-read-write" and role["Collection"] == "Item", role
    assert role["Read"] == "yes" and role["Write"] == "yes", role
    assert 'read: {"ownerId":"%%user.id"}' in role["Document filters"] and 'write: {"ownerId":"%%user.id"}' in role["Document filters"], role
    facts = text_of(browser, "#settings-sync")
    assert f"Max offline days\n{settings['max_offline_days']}" in facts, facts
    assert {"recover_unsynced_changes": "Recovery mode\nrecover unsynced changes",
            "disabled": "Recovery mode\ndisabled"}[settings["recovery_mode"]] in facts, facts
    assert settings["app_id"] in facts and "anon-user" in facts, facts
    open_details(browser, "#settings-files details")
    assert "rules.json" in text_of(browser, "#settings-files") and '"document_filters"' in text_of(browser, "#settings-files")
    shoot_both(browser, artifacts, "settings", lambda d: text_of(d, "#roles-table"))

    # Sync: pause through its confirmation. The device gets error 245 (not fatal), keeps its
    # data and writes while paused; resume carries on with the same sync identity: the write
    # is uploaded and the device gets no client reset.
    go(browser, "sync")
    wait(browser, lambda d: text_of(d, "#sync-state") == "enabled", "sync enabled")
    assert not browser.find_element(By.ID, "sync-pause").get_attribute("disabled")
    assert browser.find_element(By.ID, "sync-resume").get_attribute("disabled") is not None
    assert not browser.find_element(By.ID, "sync-terminate").get_attribute("disabled")
    assert browser.find_element(By.ID, "sync-enable").get_attribute("disabled") is not None
    shoot_both(browser, artifacts, "sync", lambda d: text_of(d, "#sync-state") == "enabled")
    click(browser, "#sync-pause")
    dialog = wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), "the pause confirmation")
    assert "error 245" in dialog.text and "keep their local data" in dialog.text and "no device gets a client reset" in dialog.text
    shoot_both(browser, artifacts, "sync-pause-confirmation")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: text_of(d, "#sync-state") == "paused", "sync paused")
    wait(browser, lambda d: text_of(d, "#sync-pill") == "sync paused", "the pill says paused")
    paused = device.wait_error(245)
    assert not paused.is_fatal
    assert browser.find_element(By.ID, "sync-enable").get_attribute("disabled") is not None
    wait(browser, lambda d: text_of(d, "#sync-connections") == "0", "no connection left while paused")
    shoot_both(browser, artifacts, "sync-paused", lambda d: text_of(d, "#sync-state") == "paused")
    written_while_paused = device.write_item(device.user.id, "written while paused", 2)
    click(browser, "#sync-resume")
    dialog = wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), "the resume confirmation")
    assert "same sync identity" in dialog.text and "none gets a client reset" in dialog.text
    shoot_both(browser, artifacts, "sync-resume-confirmation")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: text_of(d, "#sync-state") == "enabled", "sync resumed")
    device.session.wait_for_upload(timeout=120)
    assert not [e for e in device.errors if e.code == 208], f"a client reset after the resume: {device.errors}"
    # The write made while paused is on the server: it is in the user's sync log as an upload.
    log = admin_get(server, f"users/{device.user.id}/sync-log?kind=upload")
    assert any(str(written_while_paused).lower() in json.dumps(e).lower() for e in log["entries"]), log
    wait(browser, lambda d: text_of(d, "#sync-connections") != "0", "the device reconnected")

    # Terminate through the confirmation, which says what happens to the devices.
    click(browser, "#sync-terminate")
    dialog = wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), "the terminate confirmation")
    assert "error 240" in dialog.text and "keep their local data" in dialog.text and "client reset" in dialog.text
    shoot_both(browser, artifacts, "sync-terminate-confirmation")
    # Cancel does nothing.
    click(browser, "#confirm-cancel")
    wait(browser, EC.invisibility_of_element_located((By.ID, "confirm-dialog")), "the dialog closes")
    assert text_of(browser, "#sync-state") == "enabled"
    assert not [e for e in device.errors if e.code == 240]
    click(browser, "#sync-terminate")
    wait(browser, EC.visibility_of_element_located((By.ID, "confirm-ok")), "the confirmation again").click()
    wait(browser, lambda d: text_of(d, "#sync-state") == "terminated", "sync terminated")
    wait(browser, lambda d: text_of(d, "#sync-pill") == "sync terminated", "the pill says terminated")
    terminated = device.wait_error(240)
    assert not terminated.is_fatal
    wait(browser, lambda d: text_of(d, "#sync-connections") == "0", "no connection left")
    shoot_both(browser, artifacts, "sync-terminated", lambda d: text_of(d, "#sync-state") == "terminated")

    # Enable again: the confirmation says every known device resets.
    device.close()
    click(browser, "#sync-enable")
    dialog = wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), "the enable confirmation")
    assert "new sync identity" in dialog.text and "client reset" in dialog.text
    shoot_both(browser, artifacts, "sync-enable-confirmation")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: text_of(d, "#sync-state") == "enabled", "sync enabled again")

    # Two throwaway users with a device each: one's sessions are revoked, the other is deleted.
    revoked, deleted = device_factory(), device_factory()

    # Disable the user and enable it again, each through its confirmation.
    go(browser, "users")
    row = f"//table[@id='users-table']//tr[.//code[text()='{device.user.id}']]"
    for action, state in [("disable", "disabled"), ("enable", "enabled")]:
        user_action(browser, device.user.id, action)
        click(browser, "#confirm-ok")
        wait(browser, lambda d: d.find_element(By.XPATH, f"{row}//span[contains(@class, 'pill')]").text == state, f"the user {state}")

    # Revoke sessions: the confirmation says what the server does; the device is logged out
    # (error 401) and the user stays enabled.
    wait(browser, lambda d: revoked.user.id in text_of(d, "#users-table") and deleted.user.id in text_of(d, "#users-table"),
         "the throwaway users on Users")
    dialog = user_action(browser, revoked.user.id, "revoke")
    assert "access tokens" in dialog.text and "every node" in dialog.text and "error 401" in dialog.text, dialog.text
    shoot_both(browser, artifacts, "users-revoke-confirmation")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: "Sessions of user " + revoked.user.id + " revoked" in text_of(d, "#toast"), "the revocation's result")
    logged_out = revoked.wait_error(401)
    assert "revoked" in logged_out.message, logged_out.message
    revoked_row = f"//table[@id='users-table']//tr[.//code[text()='{revoked.user.id}']]"
    wait(browser, lambda d: d.find_element(By.XPATH, f"{revoked_row}//span[contains(@class, 'pill')]").text == "enabled", "still enabled")
    assert any(e["kind"] == "sessions_revoked" and e["user_id"] == revoked.user.id for e in admin_get(server, "logs")["entries"])

    # Delete: the device is logged out (error 401), the user is gone from Users and the API.
    dialog = user_action(browser, deleted.user.id, "delete")
    assert "every node" in dialog.text and "cannot be undone" in dialog.text, dialog.text
    shoot_both(browser, artifacts, "users-delete-confirmation")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: "User " + deleted.user.id + " deleted." in text_of(d, "#toast"), "the deletion's result")
    gone = deleted.wait_error(401)
    assert "deleted" in gone.message, gone.message
    wait(browser, lambda d: deleted.user.id not in text_of(d, "#users-table"), "the deleted user off Users")
    assert deleted.user.id not in [u["id"] for u in admin_get(server, "users")]
    assert device.user.id in text_of(browser, "#users-table") and revoked.user.id in text_of(browser, "#users-table")
    shoot_both(browser, artifacts, "users-after-revoke-and-delete", lambda d: deleted.user.id not in text_of(d, "#users-table"))

    # Sign out: no data left on the page, and the token is gone.
    click(browser, "#signout")
    wait(browser, EC.visibility_of_element_located((By.ID, "signin-token")), "the sign-in form after sign-out")
    assert browser.find_element(By.ID, "main").get_attribute("innerHTML") == ""
    assert browser.execute_script("return sessionStorage.getItem('ferry.adminToken')") is None
    no_script_errors(browser)
    assert key is not None


@pytest.fixture
def contract(server: Server) -> Any:
    """The newer endpoints, from the stand-in (tests/console/contract_server.py); the console's
    files from the real server."""
    import contract_server
    httpd, state = contract_server.start(server.url)
    yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    httpd.shutdown()
    httpd.server_close()


def test_the_newer_endpoints_render(contract: Any, browser: Any, artifacts: Path) -> None:
    import contract_server
    url, state = contract
    sign_in(browser, url, contract_server.TOKEN)
    wait(browser, EC.visibility_of_element_located((By.ID, "shell")), "the console after sign-in")

    # Dashboard: the rates come from the counters' deltas between two polls.
    wait(browser, lambda d: re.fullmatch(r"[\d.,]+", text_of(d, "#tile-uploads .value")), "an upload rate")
    assert text_of(browser, "#tile-sessions .value") == "4"
    assert text_of(browser, "#tile-compensating .value") == "60"
    assert text_of(browser, "#tile-resets .value") == "2"
    shoot_both(browser, artifacts, "contract-dashboard", lambda d: re.fullmatch(r"[\d.,]+", text_of(d, "#tile-downloads .value")))

    # Devices: data that looks like markup is shown as text, never run.
    go(browser, "devices")
    wait(browser, lambda d: "<script>alert(1)</script>" in text_of(d, "#devices-table"), "the devices table")
    assert contract_server.SDK in text_of(browser, "#devices-table")
    assert browser.execute_script("return document.querySelectorAll('#main script, #main img, #main b').length") == 0
    shoot_both(browser, artifacts, "contract-devices", lambda d: text_of(d, "#devices-table"))

    # Users: delete and revoke sessions go to their endpoints after the confirmation.
    go(browser, "users")
    wait(browser, lambda d: "<img src=x onerror=alert(1)>" in text_of(d, "#users-table"), "the users table")
    shoot_both(browser, artifacts, "contract-users", lambda d: text_of(d, "#users-table"))
    first = contract_server.USERS[0]["id"]
    for action, call in [("revoke", f"POST users/{first}/revoke-sessions"), ("delete", f"DELETE users/{first}"),
                         ("disable", f"POST users/{first}/disable")]:
        click(browser, f"#users-table tbody tr:first-child button[data-action='{action}']")
        dialog = wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), f"the {action} confirmation")
        assert first in dialog.text
        if action == "delete":
            shoot_both(browser, artifacts, "contract-users-delete-confirmation")
        click(browser, "#confirm-ok")
        wait(browser, lambda d: call in state.calls, f"{call} was called")
        wait(browser, EC.visibility_of_element_located((By.ID, "toast")), "the result")
    # A user gone meanwhile: the API's own 404 (with its error), not a missing endpoint.
    gone = contract_server.GONE
    for action in ("revoke", "delete"):
        click(browser, f"#users-table tbody tr:nth-child(2) button[data-action='{action}']")
        wait(browser, EC.visibility_of_element_located((By.ID, "confirm-dialog")), f"the {action} confirmation")
        click(browser, "#confirm-ok")
        wait(browser, lambda d: text_of(d, "#toast") == f"The server answered 404: no user {gone}", f"the API's 404 for {action}")

    # Sync log: every kind by default, paging with "Older", and the kind filter.
    go(browser, "sync-log", f"?user={first}")
    rows = "#log-table tbody tr"
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 50, "the first 50 entries")
    # Each kind's details, as the server records them.
    open_details(browser, "#log-table details.entry-details")
    def details(kind: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, f"#log-table details[data-kind='{kind}']").text
    upload = details("upload")
    for line in ("create Item", "update Item", "list update Item", "erase Item"):
        assert line in upload, upload
    assert "×3" in upload and "Session" in upload, upload
    written = details("compensating_write")
    assert "Rule\nwrite filter" in written and "owner-read-write" in written, written
    row_text = browser.find_element(By.XPATH, "//table[@id='log-table']//tr[.//details[@data-kind='compensating_write']]").text
    assert "denied by write filter" in row_text, row_text
    subscribed = details("subscription_changed")
    assert "simple-items: Item where complexity <= 4" in subscribed and 'mine: Item where ownerId == "<b>me</b>"' in subscribed, subscribed
    assert contract_server.SDK in details("connection_opened")
    assert "Client file\n12" in details("session_bound") and "1.0 MiB" in details("connection_closed")
    assert "unknown_client_file" in details("client_reset") and "212" in details("error")
    assert browser.execute_script("return document.querySelectorAll('#main b, #main script').length") == 0
    shoot_both(browser, artifacts, "contract-sync-log", lambda d: d.find_elements(By.CSS_SELECTOR, rows))
    click(browser, "#log-older")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 100, "the next 50 entries")
    click(browser, "#log-form input[value='compensating_write']")
    click(browser, "#log-form button[type='submit']")
    wait(browser, lambda d: "kind=compensating_write" in d.current_url, "the filter in the address")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, rows) and
         {e.text for e in d.find_elements(By.CSS_SELECTOR, "#log-table .kind")} == {"compensating write"}, "only rejected writes")
    assert any(f"GET users/{first}/sync-log" == c for c in state.calls)
    # A time range (read as UTC) goes to the API as ISO 8601.
    browser.execute_script("document.getElementById('log-since').value = '2026-11-26T12:40'")
    click(browser, "#log-form button[type='submit']")
    wait(browser, lambda d: any(q.get("since") == "2026-11-26T12:40:00.000Z" and q.get("kind") == "compensating_write"
                                for q in state.queries), "the time range in the query")

    # A user without entries: an empty log, as the server answers.
    go(browser, "sync-log", "?user=ghost")
    wait(browser, lambda d: "No sync log entry matches." in text_of(d, "#log-results"), "the empty log")
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-unavailable]")

    # Rejected writes: reason, rule and role; "Older" pages on.
    go(browser, "rejected")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rejected-table tbody tr")) == 50, "50 rejected writes")
    assert "owner-read-write" in text_of(browser, "#rejected-table")
    rules = {e.get_attribute("data-rule"): e.text for e in browser.find_elements(By.CSS_SELECTOR, "#rejected-table [data-rule]")}
    assert rules == {"write_filter": "write filter", "query_view": "query view", "key_taken": "primary key taken"}, rules
    shoot_both(browser, artifacts, "contract-rejected-writes", lambda d: d.find_elements(By.CSS_SELECTOR, "#rejected-table"))
    click(browser, "#rejected-older")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rejected-table tbody tr")) == 60, "all 60")
    wait(browser, lambda d: "No older rejected writes." in d.find_element(By.ID, "main").text, "the end of the list")

    # Settings: fields, roles, max offline days, recovery mode, and the files as text.
    go(browser, "settings")
    wait(browser, lambda d: text_of(d, "#roles-table"), "the roles")
    assert "complexity" in text_of(browser, "#settings-fields")
    facts = text_of(browser, "#settings-sync")
    assert "Max offline days\n30" in facts and "Recovery mode\nrecover unsynced changes" in facts, facts
    assert "local-userpass (disabled)" in facts and "Development mode\nno" in facts, facts
    role = text_of(browser, "#roles-table")
    assert '{"ownerId":"%%user.id"}' in role and "search: yes" in role, role
    for summary in browser.find_elements(By.CSS_SELECTOR, "#settings-files summary"):
        summary.click()
    wait(browser, lambda d: "<script>alert(1)</script>" in text_of(d, "#settings-files"), "the files' text")
    assert browser.execute_script("return document.querySelectorAll('#main script').length") == 0
    shoot_both(browser, artifacts, "contract-settings", lambda d: text_of(d, "#roles-table"))
    no_script_errors(browser)


@pytest.fixture
def older(server: Server) -> Any:
    """A server older than the console (tests/console/contract_server.py with `older`): the
    operations endpoints answer 404, the event log (`GET logs`) is there."""
    import contract_server
    httpd, state = contract_server.start(server.url, older=True)
    yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    httpd.shutdown()
    httpd.server_close()


def test_an_older_server_falls_back(older: Any, browser: Any, artifacts: Path) -> None:
    import contract_server
    url, state = older
    sign_in(browser, url, contract_server.TOKEN)
    wait(browser, EC.visibility_of_element_located((By.ID, "shell")), "the console after sign-in")
    first = contract_server.USERS[0]["id"]

    # Dashboard: connections and sync state from GET sync, compensating writes from the event log.
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-unavailable]"), "the dashboard's note")
    wait(browser, lambda d: text_of(d, "#tile-connections .value") == "3", "the connections of GET sync")
    assert text_of(browser, "#tile-compensating .value") == "1" and text_of(browser, "#tile-sessions .value") == "—"
    shoot_both(browser, artifacts, "older-dashboard", lambda d: text_of(d, "#tile-connections .value") == "3")

    go(browser, "devices")
    wait(browser, lambda d: text_of(d, "#device-count") == "Sync connections open now: 3 (from GET sync).", "the connection count")

    # Rejected writes from the event log's message, with the rule and role its reason names.
    go(browser, "rejected")
    wait(browser, lambda d: text_of(d, "#rejected-table"), "the event log's rejected write")
    cells = {td.get_attribute("data-label"): td.text for td in browser.find_elements(By.CSS_SELECTOR, "#rejected-table tbody tr td")}
    assert cells["Primary key"] == contract_server.PK and cells["Rule"] == "write filter" and cells["Role"] == "owner-read-write", cells
    assert cells["Reason"] == contract_server.write_filter_reason(contract_server.PK), cells
    assert browser.find_elements(By.CSS_SELECTOR, "[data-unavailable]")
    shoot_both(browser, artifacts, "older-rejected-writes", lambda d: text_of(d, "#rejected-table"))

    # A user's sync log: their event log entries.
    go(browser, "sync-log", f"?user={first}")
    wait(browser, lambda d: "denied by write filter" in text_of(d, "#log-table") and "error 212" in text_of(d, "#log-table"), "their entries")
    assert "sync enabled" not in text_of(browser, "#log-table")

    go(browser, "settings")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-unavailable]"), "settings not available")

    # An action the server does not have: said so, not taken for an unknown user.
    go(browser, "users")
    click(browser, "#users-table tbody tr:first-child button[data-action='delete']")
    click(browser, "#confirm-ok")
    wait(browser, lambda d: text_of(d, "#toast") == f"Not available on this server: DELETE /api/admin/v1/users/{first} answered 404.",
         "the missing endpoint")
    no_script_errors(browser)


class _Hook(http.server.BaseHTTPRequestHandler):
    """A trigger's webhook: answers 500 while `failing`, else 204; counts what it got."""
    failing = True
    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).received.append(body)
        self.send_response(500 if type(self).failing else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_paused_trigger_is_shown_and_resumed(tmp_path: Path, browser: Any, artifacts: Path, tmp_path_factory: Any) -> None:
    # A webhook that fails: the trigger pauses after one failure (max_failures 1).
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    app = tmp_path / "app"
    shutil.copytree(REPO / "examples" / "item-app", app)
    (app / "triggers").mkdir()
    (app / "triggers" / "items.json").write_text(json.dumps({
        "name": "items", "max_failures": 1,
        "config": {"collection": "Item", "operation_types": ["INSERT", "UPDATE", "DELETE"]},
        "webhook": {"url": f"http://127.0.0.1:{hook.server_address[1]}/hook", "secret_name": "FERRY_TRIGGER_SECRET_ITEMS"}}))
    server = Server(tmp_path / "server", ADMIN_TOKEN, app_dir=app, extra_env={"FERRY_TRIGGER_SECRET_ITEMS": "a-console-test-trigger-secret-of-32-bytes"})
    device = None
    try:
        def trigger() -> dict[str, Any]:
            return admin_get(server, "triggers")["triggers"][0]
        wait_until(lambda: trigger()["started"], message="the trigger to start")
        device = Device(server.url, tmp_path_factory.mktemp("ferry-console-trigger-device"))
        device.write_item(device.user.id, "for the webhook", 1)
        wait_until(lambda: trigger()["paused"], message="the trigger to pause")
        assert trigger()["failures"] == 1 and "500" in trigger()["last_error"], trigger()

        sign_in(browser, server.url, ADMIN_TOKEN)
        wait(browser, EC.visibility_of_element_located((By.ID, "shell")), "the console after sign-in")
        go(browser, "triggers")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#triggers-table [data-state="paused"]'), "the paused trigger")
        table = text_of(browser, "#triggers-table")
        assert "items" in table and "Item" in table and "500" in table, table
        shoot_both(browser, artifacts, "triggers-paused", lambda d: d.find_elements(By.CSS_SELECTOR, "#triggers-table"))

        # Resumed from the page once the webhook answers: the change is delivered.
        _Hook.failing = False
        click(browser, '[data-resume="items"]')
        wait(browser, EC.visibility_of_element_located((By.ID, "confirm-ok")), "the confirmation")
        assert "change that failed" in text_of(browser, "#confirm-text")
        click(browser, "#confirm-ok")
        wait_until(lambda: trigger()["delivered"] == 1 and not trigger()["paused"], message="the change delivered after the resume")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#triggers-table [data-state="delivering"]'), "the trigger delivering again")
        assert json.loads(_Hook.received[-1])["operationType"] == "insert"
        shoot_both(browser, artifacts, "triggers-delivering", lambda d: d.find_elements(By.CSS_SELECTOR, "#triggers-table"))
    finally:
        if device is not None:
            device.close()
        server.stop()
        hook.shutdown()
