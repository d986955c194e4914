/* The thought page's neighbourhood graph, drawn with Cytoscape.js from the page's JSON block (#graph-data).
 * No inline script: the console's Content-Security-Policy allows scripts from the console only. Without
 * JavaScript the drawing stays hidden and the lists of the page (same thoughts, as links) serve alone. */
(function () {
  "use strict";
  var source = document.getElementById("graph-data");
  var box = document.getElementById("graph");
  if (!source || !box || typeof window.cytoscape !== "function") {
    return;
  }
  var graph = JSON.parse(source.textContent);
  var elements = [];
  graph.nodes.forEach(function (node) {
    elements.push({ group: "nodes", data: node, classes: node.centre ? "centre" : "" });
  });
  graph.edges.forEach(function (edge) {
    elements.push({ group: "edges", data: edge });
  });
  box.hidden = false;
  var cy = window.cytoscape({
    container: box,
    elements: elements,
    boxSelectionEnabled: false,
    autoungrabify: true,
    minZoom: 0.3,
    maxZoom: 3,
    style: [
      {
        selector: "node",
        style: {
          "background-color": "data(colour)",
          "border-width": 1,
          "border-color": "#1b1f24",
          label: "data(label)",
          color: "#1b1f24",
          "font-size": 11,
          "text-wrap": "wrap",
          "text-max-width": "140px",
          "text-valign": "bottom",
          "text-margin-y": 4,
          width: 22,
          height: 22
        }
      },
      { selector: "node.centre", style: { width: 36, height: 36, "border-width": 4, "font-weight": "bold" } },
      { selector: "node.focused", style: { "border-width": 4, "border-color": "#b45309" } },
      {
        selector: "edge",
        style: {
          width: 2,
          "line-color": "data(colour)",
          "line-style": "data(line)",
          "target-arrow-color": "data(colour)",
          "target-arrow-shape": "triangle",
          "curve-style": "bezier",
          label: "data(type)",
          "font-size": 9,
          color: "#4a5260",
          "text-rotation": "autorotate",
          "text-background-color": "#ffffff",
          "text-background-opacity": 1
        }
      }
    ],
    layout: {
      name: "concentric",
      animate: false,
      fit: true,
      padding: 40,
      minNodeSpacing: 80,
      concentric: function (node) {
        return node.data("centre") ? 2 : 1;
      },
      levelWidth: function () {
        return 1;
      }
    }
  });

  function walk(id) {
    if (id && id !== graph.centre) {
      window.location.assign("/ui/thoughts/" + encodeURIComponent(id));
    }
  }

  function position(id) {
    var node = cy.getElementById(id);
    if (node.empty()) {
      return null;
    }
    var rendered = node.renderedPosition();
    var frame = box.getBoundingClientRect();
    return { x: frame.left + rendered.x, y: frame.top + rendered.y };
  }

  cy.on("tap", "node", function (event) {
    walk(event.target.id());
  });
  cy.on("mouseover", "node", function (event) {
    box.style.cursor = event.target.data("centre") ? "default" : "pointer";
  });
  cy.on("mouseout", "node", function () {
    box.style.cursor = "default";
  });
  // The list mirrors the graph: focusing or hovering a thought's link marks its node.
  document.querySelectorAll(".graph-nodes a[data-node]").forEach(function (link) {
    var mark = function (on) {
      cy.getElementById(link.getAttribute("data-node")).toggleClass("focused", on);
    };
    link.addEventListener("focus", function () { mark(true); });
    link.addEventListener("blur", function () { mark(false); });
    link.addEventListener("mouseenter", function () { mark(true); });
    link.addEventListener("mouseleave", function () { mark(false); });
  });
  window.synaptoGraph = { cy: cy, walk: walk, position: position };
  box.setAttribute("data-ready", "true");
})();
