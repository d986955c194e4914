// Keyboard triage on the review queues (templates/triage_keys.html names the keys): j / k move to the next /
// previous item, x ticks its checkbox, and a letter a button carries in data-key (a apply, r reject, p protect,
// d delete) presses that button of the item in focus. Keys typed into a field are left alone. Without JavaScript
// the checkboxes and buttons work as they are.
(function () {
  "use strict";
  var items = Array.prototype.slice.call(document.querySelectorAll(".triage-item"));
  if (!items.length) { return; }
  var current = -1;

  function focusItem(index) {
    if (index < 0 || index >= items.length) { return; }
    if (current >= 0) { items[current].classList.remove("triage-current"); }
    current = index;
    items[current].classList.add("triage-current");
    items[current].focus();
    items[current].scrollIntoView({ block: "nearest" });
  }

  items.forEach(function (item, index) {
    item.addEventListener("focusin", function () {
      if (current !== index) {
        if (current >= 0) { items[current].classList.remove("triage-current"); }
        current = index;
        item.classList.add("triage-current");
      }
    });
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var target = event.target;
    var tag = target && target.tagName;
    if (tag === "INPUT" && target.type !== "checkbox" || tag === "TEXTAREA" || tag === "SELECT") { return; }
    var key = event.key;
    if (key === "j") { focusItem(current + 1); event.preventDefault(); return; }
    if (key === "k") { focusItem(current <= 0 ? 0 : current - 1); event.preventDefault(); return; }
    if (current < 0) { return; }
    var item = items[current];
    if (key === "x") {
      var box = item.querySelector("input[type=checkbox]");
      if (box) { box.checked = !box.checked; }
      event.preventDefault();
      return;
    }
    var button = item.querySelector('button[data-key="' + key + '"]');
    if (button) { event.preventDefault(); button.click(); }
  });

  window.synaptoTriage = { current: function () { return current; } };
}());
